// TesseraBackend's calls that move bytes between pairs of ranks: all-to-all (equal blocks:
// tsrAlltoAll; uneven splits: tsrAlltoAllv), the list forms, gather and scatter (sends and
// receives on the group's communicator, matched in collective order), torch's send/recv (tags:
// p2p.hpp) and the barrier.
#include <ATen/ATen.h>

#include <numeric>

#include "backend.hpp"
#include "cuda.hpp"
#include "types.hpp"

namespace tessera_torch {
namespace {

using Work = c10::intrusive_ptr<c10d::Work>;

// A contiguous stand-in for `t` (itself when it is contiguous).
at::Tensor densify(const at::Tensor& t) { return t.is_contiguous() ? t : t.contiguous(); }

// Copies results of stand-ins back into tensors that were not contiguous.
std::function<void()> copyBack(std::vector<std::pair<at::Tensor, at::Tensor>> pairs) {
  if (pairs.empty()) return nullptr;
  return [pairs] {
    for (const auto& [orig, d] : pairs) orig.copy_(d);
  };
}

// Byte counts and displacements of uneven all-to-all blocks along dimension 0.
void splitBytes(const std::vector<int64_t>& splits, const at::Tensor& t, int n, const char* which,
                std::vector<size_t>* counts, std::vector<size_t>* displs) {
  const char* api = "all_to_all_single";
  const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
  const size_t rowBytes = rows == 0 ? 0 : tensorBytes(t) / static_cast<size_t>(rows);
  if (splits.empty()) {
    if (rows % n != 0)
      bad(api, std::string(which) + " has " + std::to_string(rows) + " rows, which " +
                   std::to_string(n) + " ranks cannot share equally (give split sizes)");
    counts->assign(static_cast<size_t>(n), rowBytes * static_cast<size_t>(rows / n));
  } else {
    if (splits.size() != static_cast<size_t>(n))
      bad(api, std::string(which) + " split sizes have " + std::to_string(splits.size()) +
                   " entries for " + std::to_string(n) + " ranks");
    int64_t sum = 0;
    for (int64_t s : splits) {
      if (s < 0) bad(api, std::string(which) + " split size " + std::to_string(s) + " is negative");
      sum += s;
    }
    if (sum != rows)
      bad(api, std::string(which) + " split sizes add up to " + std::to_string(sum) +
                   " rows, but the tensor has " + std::to_string(rows));
    for (int64_t s : splits) counts->push_back(rowBytes * static_cast<size_t>(s));
  }
  displs->assign(counts->size(), 0);
  for (size_t i = 1; i < counts->size(); ++i) (*displs)[i] = (*displs)[i - 1] + (*counts)[i - 1];
}

}  // namespace

Work TesseraBackend::all_to_all_single(at::Tensor& output, at::Tensor& input,
                                       std::vector<int64_t>& outputSplits,
                                       std::vector<int64_t>& inputSplits,
                                       const c10d::AllToAllOptions& opts) {
  const char* api = "all_to_all_single";
  checkTensor(input, api);
  sameKind(input, output, api);
  auto sc = std::make_shared<std::vector<size_t>>(), sd = std::make_shared<std::vector<size_t>>();
  auto rc = std::make_shared<std::vector<size_t>>(), rd = std::make_shared<std::vector<size_t>>();
  splitBytes(inputSplits, input, size_, "the input", sc.get(), sd.get());
  splitBytes(outputSplits, output, size_, "the output", rc.get(), rd.get());
  const bool equal = outputSplits.empty() && inputSplits.empty();
  // tessera has no in-place all-to-all: the same tensor on both sides sends a copy.
  at::Tensor in = input.is_same(output) || input.data_ptr() == output.data_ptr()
                      ? input.contiguous().clone()
                      : densify(input);
  at::Tensor out = densify(output);
  Steps s;
  s.issue = [this, in, out, equal, sc, sd, rc, rd] {
    tsrComm_t c = commFor(in);
    auto stream = static_cast<tsrStream_t>(streamFor(in));
    if (equal)
      check(tsrAlltoAll(in.data_ptr(), out.data_ptr(), (*sc)[0], tsrUint8, c, stream),
            "tsrAlltoAll");
    else
      check(tsrAlltoAllv(in.data_ptr(), sc->data(), sd->data(), out.data_ptr(), rc->data(),
                         rd->data(), tsrUint8, c, stream),
            "tsrAlltoAllv");
  };
  if (!out.is_same(output)) s.finish = copyBack({{output, out}});
  s.tensors = {in, out, output};
  // Uneven splits differ between ranks by design: the dtype and the form are compared.
  if (checkCalls_)
    s.signature =
        std::string(api) + " " + dtypeName(input.scalar_type()) + (equal ? "" : " uneven");
  return submit(c10d::OpType::ALLTOALL_BASE, "tessera:all_to_all_single", {output}, opts.asyncOp,
                std::move(s), input);
}

TesseraBackend::Steps TesseraBackend::transferSteps(std::vector<Transfer> transfers) {
  auto ts = std::make_shared<std::vector<Transfer>>(std::move(transfers));
  Steps s;
  s.issue = [this, ts] {
    TsrGroup g;
    for (const Transfer& t : *ts) {
      if (tensorBytes(t.tensor) == 0) continue;
      tsrComm_t c = commFor(t.tensor);
      auto stream = static_cast<tsrStream_t>(streamFor(t.tensor));
      if (t.isSend)
        check(tsrSend(t.tensor.data_ptr(), tensorBytes(t.tensor), tsrUint8, t.peer, c, stream),
              "tsrSend");
      else
        check(tsrRecv(t.tensor.data_ptr(), tensorBytes(t.tensor), tsrUint8, t.peer, c, stream),
              "tsrRecv");
    }
    g.end();
  };
  for (const Transfer& t : *ts) s.tensors.push_back(t.tensor);
  return s;
}

Work TesseraBackend::alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                              const c10d::AllToAllOptions& opts) {
  const char* api = "all_to_all";
  if (inputs.size() != static_cast<size_t>(size_) || outputs.size() != static_cast<size_t>(size_))
    bad(api, std::to_string(inputs.size()) + " inputs and " + std::to_string(outputs.size()) +
                 " outputs for " + std::to_string(size_) + " ranks");
  checkTensor(inputs[0], api);
  std::vector<Transfer> ts;
  std::vector<std::pair<at::Tensor, at::Tensor>> back;
  for (int p = 0; p < size_; ++p) {
    sameKind(inputs[0], inputs[static_cast<size_t>(p)], api);
    sameKind(inputs[0], outputs[static_cast<size_t>(p)], api);
    const at::Tensor& o = outputs[static_cast<size_t>(p)];
    at::Tensor out = densify(o);
    if (!out.is_same(o)) back.emplace_back(o, out);
    ts.push_back({true, p, densify(inputs[static_cast<size_t>(p)])});
    ts.push_back({false, p, out});
  }
  Steps s = transferSteps(std::move(ts));
  s.finish = copyBack(std::move(back));
  if (checkCalls_) s.signature = std::string(api) + " " + dtypeName(inputs[0].scalar_type());
  return submit(c10d::OpType::ALLTOALL, "tessera:all_to_all", outputs, opts.asyncOp, std::move(s),
                inputs[0]);
}

Work TesseraBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                            std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) {
  const char* api = "gather";
  if (inputs.size() != 1) bad(api, "takes one tensor per process");
  checkTensor(inputs[0], api);
  checkRank(opts.rootRank, size_, "root", api);
  const int root = static_cast<int>(opts.rootRank);
  const at::Tensor& in = inputs[0];
  std::vector<Transfer> ts;
  std::vector<std::pair<at::Tensor, at::Tensor>> back;
  std::vector<at::Tensor> results;
  if (rank_ == root) {
    if (outputs.size() != 1 || outputs[0].size() != static_cast<size_t>(size_))
      bad(api, "the root takes one list of " + std::to_string(size_) + " output tensors");
    for (int p = 0; p < size_; ++p) {
      const at::Tensor& o = outputs[0][static_cast<size_t>(p)];
      sameKind(in, o, api);
      if (o.numel() != in.numel())
        bad(api, "output " + std::to_string(p) + " has " + std::to_string(o.numel()) +
                     " elements, the input " + std::to_string(in.numel()));
      if (p == root) {
        back.emplace_back(o, in);  // the root's own block: a copy
        continue;
      }
      at::Tensor out = densify(o);
      if (!out.is_same(o)) back.emplace_back(o, out);
      ts.push_back({false, p, out});
    }
    results = outputs[0];
  } else {
    if (!outputs.empty() && !outputs[0].empty())
      bad(api, "only the root (rank " + std::to_string(root) + ") takes output tensors");
    ts.push_back({true, root, densify(in)});
  }
  Steps s = transferSteps(std::move(ts));
  s.finish = copyBack(std::move(back));
  if (checkCalls_) s.signature = callSignature(api, in, "root " + std::to_string(root));
  return submit(c10d::OpType::GATHER, "tessera:gather", results, opts.asyncOp, std::move(s), in);
}

Work TesseraBackend::scatter(std::vector<at::Tensor>& outputs,
                             std::vector<std::vector<at::Tensor>>& inputs,
                             const c10d::ScatterOptions& opts) {
  const char* api = "scatter";
  if (outputs.size() != 1) bad(api, "takes one output tensor per process");
  checkTensor(outputs[0], api);
  checkRank(opts.rootRank, size_, "root", api);
  const int root = static_cast<int>(opts.rootRank);
  const at::Tensor& o = outputs[0];
  std::vector<Transfer> ts;
  std::vector<std::pair<at::Tensor, at::Tensor>> back;
  at::Tensor out = densify(o);
  if (rank_ == root) {
    if (inputs.size() != 1 || inputs[0].size() != static_cast<size_t>(size_))
      bad(api, "the root takes one list of " + std::to_string(size_) + " input tensors");
    for (int p = 0; p < size_; ++p) {
      const at::Tensor& i = inputs[0][static_cast<size_t>(p)];
      sameKind(o, i, api);
      if (i.numel() != o.numel())
        bad(api, "input " + std::to_string(p) + " has " + std::to_string(i.numel()) +
                     " elements, the output " + std::to_string(o.numel()));
      if (p == root)
        back.emplace_back(o, i);
      else
        ts.push_back({true, p, densify(i)});
    }
  } else {
    if (!inputs.empty() && !inputs[0].empty())
      bad(api, "only the root (rank " + std::to_string(root) + ") takes input tensors");
    if (!out.is_same(o)) back.emplace_back(o, out);
    ts.push_back({false, root, out});
  }
  Steps s = transferSteps(std::move(ts));
  s.finish = copyBack(std::move(back));
  if (checkCalls_) s.signature = callSignature(api, o, "root " + std::to_string(root));
  return submit(c10d::OpType::SCATTER, "tessera:scatter", outputs, opts.asyncOp, std::move(s), o);
}

Work TesseraBackend::send(std::vector<at::Tensor>& tensors, int dstRank, int tag) {
  const char* api = "send";
  if (tensors.size() != 1) bad(api, "takes one tensor");
  checkTensor(tensors[0], api);
  checkRank(dstRank, size_, "destination", api);
  Steps s;
  // The bytes as they are now: a copy when not contiguous (the caller may change it at once).
  s.p2p.push_back(P2POp{true, dstRank, tag, densify(tensors[0])});
  s.tensors = {s.p2p[0].tensor};
  return submit(c10d::OpType::SEND, "tessera:send", tensors, /*async=*/true, std::move(s),
                tensors[0]);
}

Work TesseraBackend::recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) {
  const char* api = "recv";
  if (tensors.size() != 1) bad(api, "takes one tensor");
  checkTensor(tensors[0], api);
  checkRank(srcRank, size_, "source", api);
  at::Tensor d = densify(tensors[0]);
  Steps s;
  s.p2p.push_back(P2POp{false, srcRank, tag, d});
  if (!d.is_same(tensors[0])) s.finish = copyBack({{tensors[0], d}});
  s.tensors = {d, tensors[0]};
  return submit(c10d::OpType::RECV, "tessera:recv", tensors, /*async=*/true, std::move(s),
                tensors[0]);
}

Work TesseraBackend::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  const char* api = "recv from any source";
  if (tensors.size() != 1) bad(api, "takes one tensor");
  checkTensor(tensors[0], api);
  if (!anySource_)
    throwResult(tsrInvalidUsage,
                std::string(api) + ": this group has " + std::to_string(size_) +
                    " ranks, more than TESSERA_TORCH_ANY_SOURCE_RANKS allows, so its ranks were "
                    "not all linked when it was made (512 KiB of host memory per peer); name the "
                    "source, or raise that setting for every rank");
  if (coalescing_)
    throwResult(tsrInvalidUsage, std::string(api) +
                                     " cannot be part of a coalesced batch (batch_isend_irecv "
                                     "needs a source for each receive)");
  at::Tensor d = densify(tensors[0]);
  auto source = std::make_shared<std::atomic<int>>(-1);
  Steps s;
  s.issue = [this, d, tag, source] {
    source->store(p2p_->recvAny(d, tag), std::memory_order_release);
  };
  if (!d.is_same(tensors[0])) s.finish = copyBack({{tensors[0], d}});
  s.tensors = {d, tensors[0]};
  auto work = submit(c10d::OpType::RECVANYSOURCE, "tessera:recv_anysource", tensors,
                     /*async=*/true, std::move(s), tensors[0]);
  static_cast<TesseraWork*>(work.get())->source = source;
  return work;
}

Work TesseraBackend::barrier(const c10d::BarrierOptions& opts) {
  // A one-byte all-reduce on the host, after the group's device streams ran what they hold (so
  // device calls made before the barrier are done when it returns, as with ProcessGroupNCCL).
  auto flag = at::zeros({1}, at::TensorOptions().dtype(at::kByte));
  Steps s;
  s.issue = [this, flag] {
    device_->synchronize();
    check(tsrAllReduce(flag.data_ptr(), flag.data_ptr(), 1, tsrUint8, tsrMax, comm_, nullptr),
          "tsrAllReduce (barrier)");
  };
  if (checkCalls_) s.signature = "barrier";
  return submit(c10d::OpType::BARRIER, "tessera:barrier", {}, opts.asyncOp, std::move(s));
}

}  // namespace tessera_torch
