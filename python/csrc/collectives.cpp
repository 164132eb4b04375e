// TesseraBackend's collectives: each checks its arguments on the calling thread (a bad call raises
// at once and nothing runs), then hands submit() what runs on the queue.
//
// Tensors. tessera reads and writes dense buffers: a tensor that is not contiguous is copied into
// one and the result copied back (as Gloo's results on such tensors). Calls that move bytes
// without reducing them (broadcast, gathers, all-to-all, send/recv) move any dtype as bytes;
// reductions take the dtypes tessera reduces (types.hpp), complex tensors as real pairs where the
// op allows it (SUM, AVG, PREMUL_SUM with a real factor).
#include <ATen/ATen.h>

#include <numeric>

#include "backend.hpp"
#include "cuda.hpp"
#include "types.hpp"

namespace tessera_torch {
namespace {

using Work = c10::intrusive_ptr<c10d::Work>;

// The one tensor of a list form (torch passes one tensor per process).
const at::Tensor& single(const std::vector<at::Tensor>& ts, const char* api) {
  if (ts.size() != 1) bad(api, "takes one tensor per process, got " + std::to_string(ts.size()));
  checkTensor(ts[0], api);
  return ts[0];
}

// A tensor as tessera reads or writes it: itself when contiguous, else a contiguous copy whose
// result back() copies into the original.
struct Dense {
  at::Tensor orig;
  at::Tensor t;
  explicit Dense(const at::Tensor& x) : orig(x), t(x.is_contiguous() ? x : x.contiguous()) {}
  void back() const {
    if (!t.is_same(orig)) orig.copy_(t);
  }
  void* ptr() const { return t.data_ptr(); }
  size_t bytes() const { return tensorBytes(t); }
};
using DenseP = std::shared_ptr<Dense>;
DenseP dense(const at::Tensor& x) { return std::make_shared<Dense>(x); }

// A reduction's view of `t`: complex tensors as real pairs.
at::Tensor reduceView(const at::Tensor& t, const c10d::ReduceOp& op, const char* api) {
  if (!t.is_complex()) return t;
  if (!c10d::isComplexViewAsRealAllowed(op))
    bad(api, "this reduce op has no meaning on complex tensors (SUM, AVG and PREMUL_SUM do)");
  return at::view_as_real(t.is_conj() ? t.resolve_conj() : t);
}

// The tensors a device call's stream uses.
std::vector<at::Tensor> uses(std::initializer_list<DenseP> ds) {
  std::vector<at::Tensor> out;
  for (const DenseP& d : ds) {
    out.push_back(d->t);
    out.push_back(d->orig);
  }
  return out;
}

}  // namespace

Work TesseraBackend::broadcast(std::vector<at::Tensor>& tensors,
                               const c10d::BroadcastOptions& opts) {
  const char* api = "broadcast";
  const at::Tensor& t = single(tensors, api);
  checkRank(opts.rootRank, size_, "root", api);
  const int root = static_cast<int>(opts.rootRank);
  DenseP d = dense(t);
  Steps s;
  s.issue = [this, d, root] {
    check(tsrBroadcast(d->ptr(), d->ptr(), d->bytes(), tsrUint8, root, commFor(d->t),
                       static_cast<tsrStream_t>(streamFor(d->t))),
          "tsrBroadcast");
  };
  s.finish = [d] { d->back(); };
  s.tensors = uses({d});
  if (checkCalls_) s.signature = callSignature(api, t, "root " + std::to_string(root));
  return submit(c10d::OpType::BROADCAST, "tessera:broadcast", {t}, opts.asyncOp, std::move(s), t);
}

// All-reduce of each of `ts` (one tensor: its own call; several: one tessera group).
Work TesseraBackend::allreduce(std::vector<at::Tensor>& tensors,
                               const c10d::AllreduceOptions& opts) {
  const char* api = "allreduce";
  const at::Tensor& t = single(tensors, api);
  at::Tensor view = reduceView(t, opts.reduceOp, api);
  checkReduce(view.scalar_type(), opts.reduceOp, api);
  DenseP d = dense(view);
  auto op = opts.reduceOp;
  Steps s;
  auto spec = std::make_shared<ReduceSpec>();
  s.issue = [this, d, op, spec] {
    tsrComm_t c = commFor(d->t);
    *spec = makeReduce(d->t.scalar_type(), op, c, d->t.is_cuda());
    check(tsrAllReduce(d->ptr(), d->ptr(), d->t.numel(), spec->dtype, spec->op, c,
                       static_cast<tsrStream_t>(streamFor(d->t))),
          "tsrAllReduce");
  };
  s.finish = [d, spec] {
    spec->release();
    d->back();
  };
  s.tensors = uses({d});
  if (checkCalls_) s.signature = callSignature(api, view, reduceOpName(op));
  return submit(c10d::OpType::ALLREDUCE, "tessera:all_reduce", {t}, opts.asyncOp, std::move(s), t);
}

Work TesseraBackend::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                         const c10d::AllreduceCoalescedOptions& opts) {
  const char* api = "allreduce_coalesced";
  if (tensors.empty()) bad(api, "no tensors");
  std::vector<DenseP> ds;
  for (const at::Tensor& t : tensors) {
    sameKind(tensors[0], t, api);
    at::Tensor view = reduceView(t, opts.reduceOp, api);
    checkReduce(view.scalar_type(), opts.reduceOp, api);
    ds.push_back(dense(view));
  }
  auto op = opts.reduceOp;
  auto specs = std::make_shared<std::vector<ReduceSpec>>(ds.size());
  Steps s;
  s.issue = [this, ds, op, specs] {
    TsrGroup g;
    for (size_t i = 0; i < ds.size(); ++i) {
      const DenseP& d = ds[i];
      tsrComm_t c = commFor(d->t);
      (*specs)[i] = makeReduce(d->t.scalar_type(), op, c, d->t.is_cuda());
      check(tsrAllReduce(d->ptr(), d->ptr(), d->t.numel(), (*specs)[i].dtype, (*specs)[i].op, c,
                         static_cast<tsrStream_t>(streamFor(d->t))),
            "tsrAllReduce");
    }
    g.end();
  };
  s.finish = [ds, specs] {
    for (ReduceSpec& r : *specs) r.release();
    for (const DenseP& d : ds) d->back();
  };
  for (const DenseP& d : ds) {
    s.tensors.push_back(d->t);
    s.tensors.push_back(d->orig);
  }
  return submit(c10d::OpType::ALLREDUCE_COALESCED, "tessera:all_reduce_coalesced", tensors,
                opts.asyncOp, std::move(s), tensors[0]);
}

Work TesseraBackend::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  const char* api = "reduce";
  const at::Tensor& t = single(tensors, api);
  checkRank(opts.rootRank, size_, "root", api);
  at::Tensor view = reduceView(t, opts.reduceOp, api);
  checkReduce(view.scalar_type(), opts.reduceOp, api);
  DenseP d = dense(view);
  auto op = opts.reduceOp;
  const int root = static_cast<int>(opts.rootRank);
  auto spec = std::make_shared<ReduceSpec>();
  Steps s;
  s.issue = [this, d, op, spec, root] {
    tsrComm_t c = commFor(d->t);
    *spec = makeReduce(d->t.scalar_type(), op, c, d->t.is_cuda());
    check(tsrReduce(d->ptr(), d->ptr(), d->t.numel(), spec->dtype, spec->op, root, c,
                    static_cast<tsrStream_t>(streamFor(d->t))),
          "tsrReduce");
  };
  s.finish = [this, d, spec, root] {
    spec->release();
    if (rank_ == root) d->back();
  };
  s.tensors = uses({d});
  if (checkCalls_)
    s.signature = callSignature(api, view, reduceOpName(op) + " root " + std::to_string(root));
  return submit(c10d::OpType::REDUCE, "tessera:reduce", {t}, opts.asyncOp, std::move(s), t);
}

// ---- gathers ------------------------------------------------------------------------------

// The gathered blocks go straight into `outs` when they are contiguous and laid out one after
// the other (torch.empty(n * k).chunk(n)); else through a flat buffer copied out afterwards.
static bool adjacent(const std::vector<at::Tensor>& outs) {
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!outs[i].is_contiguous()) return false;
    const auto* base = static_cast<const char*>(outs[0].data_ptr());
    if (static_cast<const char*>(outs[i].data_ptr()) != base + i * tensorBytes(outs[0]))
      return false;
  }
  return true;
}

Work TesseraBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                               std::vector<at::Tensor>& inputs,
                               const c10d::AllgatherOptions& opts) {
  const char* api = "allgather";
  const at::Tensor& in = single(inputs, api);
  if (outputs.size() != 1) bad(api, "takes one output list per process");
  auto& outs = outputs[0];
  if (outs.size() != static_cast<size_t>(size_))
    bad(api, "the output list has " + std::to_string(outs.size()) + " tensors for " +
                 std::to_string(size_) + " ranks");
  for (const at::Tensor& o : outs) sameKind(in, o, api, true);
  DenseP din = dense(in);
  const bool direct = adjacent(outs);
  at::Tensor flat = direct ? at::Tensor() : at::empty({size_ * in.numel()}, in.options());
  std::vector<at::Tensor> outsCopy = outs;
  Steps s;
  s.issue = [this, din, direct, flat, outsCopy] {
    void* dst = direct ? outsCopy[0].data_ptr() : flat.data_ptr();
    check(tsrAllGather(din->ptr(), dst, din->bytes(), tsrUint8, commFor(din->t),
                       static_cast<tsrStream_t>(streamFor(din->t))),
          "tsrAllGather");
  };
  if (!direct)
    s.finish = [flat, outsCopy] {
      for (size_t i = 0; i < outsCopy.size(); ++i)
        outsCopy[i].copy_(
            flat.narrow(0, i * outsCopy[i].numel(), outsCopy[i].numel()).view(outsCopy[i].sizes()));
    };
  s.tensors = outsCopy;
  s.tensors.push_back(din->t);
  if (flat.defined()) s.tensors.push_back(flat);
  if (checkCalls_) s.signature = callSignature(api, in);
  return submit(c10d::OpType::ALLGATHER, "tessera:all_gather", outs, opts.asyncOp, std::move(s),
                in);
}

Work TesseraBackend::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                         std::vector<at::Tensor>& inputs,
                                         const c10d::AllgatherOptions& opts) {
  const char* api = "allgather_coalesced";
  if (inputs.empty()) bad(api, "no input tensors");
  for (const at::Tensor& in : inputs) sameKind(inputs[0], in, api);
  if (outputs.size() != static_cast<size_t>(size_))
    bad(api, "takes one output list per rank: " + std::to_string(outputs.size()) + " lists for " +
                 std::to_string(size_) + " ranks");
  for (size_t r = 0; r < outputs.size(); ++r) {
    if (outputs[r].size() != inputs.size())
      bad(api, "output list " + std::to_string(r) + " has " + std::to_string(outputs[r].size()) +
                   " tensors for " + std::to_string(inputs.size()) + " inputs");
    for (size_t i = 0; i < inputs.size(); ++i) sameKind(inputs[i], outputs[r][i], api, true);
  }
  // This rank's inputs packed into one block; the ranks' blocks gathered side by side.
  int64_t block = 0;
  for (const at::Tensor& in : inputs) block += in.numel();
  at::Tensor packed = at::empty({block}, inputs[0].options());
  at::Tensor gathered = at::empty({block * size_}, inputs[0].options());
  std::vector<at::Tensor> ins = inputs;
  std::vector<std::vector<at::Tensor>> outsCopy = outputs;
  Steps s;
  s.issue = [this, ins, packed, gathered] {
    int64_t offset = 0;
    for (const at::Tensor& in : ins) {
      packed.narrow(0, offset, in.numel()).copy_(in.reshape({-1}));
      offset += in.numel();
    }
    check(tsrAllGather(packed.data_ptr(), gathered.data_ptr(), tensorBytes(packed), tsrUint8,
                       commFor(packed), static_cast<tsrStream_t>(streamFor(packed))),
          "tsrAllGather");
  };
  s.finish = [outsCopy, gathered, block] {
    for (size_t r = 0; r < outsCopy.size(); ++r) {
      int64_t offset = static_cast<int64_t>(r) * block;
      for (const at::Tensor& o : outsCopy[r]) {
        o.copy_(gathered.narrow(0, offset, o.numel()).view(o.sizes()));
        offset += o.numel();
      }
    }
  };
  std::vector<at::Tensor> flatOuts;
  for (const auto& l : outputs) flatOuts.insert(flatOuts.end(), l.begin(), l.end());
  s.tensors = flatOuts;
  s.tensors.insert(s.tensors.end(), ins.begin(), ins.end());
  s.tensors.push_back(packed);
  s.tensors.push_back(gathered);
  if (checkCalls_) s.signature = callSignature(api, packed);
  return submit(c10d::OpType::ALLGATHER_COALESCED, "tessera:all_gather_coalesced", flatOuts,
                opts.asyncOp, std::move(s), packed);
}

TesseraBackend::Steps TesseraBackend::gatherSingleSteps(const at::Tensor& output,
                                                        const at::Tensor& input, const char* api) {
  checkTensor(input, api);
  sameKind(input, output, api);
  if (output.numel() != input.numel() * size_)
    bad(api, "the output has " + std::to_string(output.numel()) + " elements, but " +
                 std::to_string(size_) + " ranks of " + std::to_string(input.numel()) + " make " +
                 std::to_string(input.numel() * size_));
  DenseP dout = dense(output);
  // In place (the input is this rank's block of the output) keeps working on the dense copy.
  const bool inPlace =
      input.is_contiguous() && output.is_contiguous() &&
      input.data_ptr() == static_cast<char*>(output.data_ptr()) + rank_ * tensorBytes(input);
  DenseP din = inPlace ? nullptr : dense(input);
  Steps s;
  s.issue = [this, dout, din] {
    const void* src =
        din ? din->ptr() : static_cast<char*>(dout->ptr()) + rank_ * (dout->bytes() / size_);
    check(tsrAllGather(src, dout->ptr(), dout->bytes() / size_, tsrUint8, commFor(dout->t),
                       static_cast<tsrStream_t>(streamFor(dout->t))),
          "tsrAllGather");
  };
  s.finish = [dout] { dout->back(); };
  s.tensors = din ? uses({dout, din}) : uses({dout});
  if (checkCalls_) s.signature = callSignature(api, input);
  return s;
}

Work TesseraBackend::all_gather_single(at::Tensor& output, at::Tensor& input,
                                       const c10d::AllgatherOptions& opts) {
  Steps s = gatherSingleSteps(output, input, "all_gather_into_tensor");
  return submit(c10d::OpType::_ALLGATHER_BASE, "tessera:all_gather_into_tensor", {output},
                opts.asyncOp, std::move(s), output);
}

Work TesseraBackend::all_gather_single_coalesced(std::vector<at::Tensor>& outputs,
                                                 std::vector<at::Tensor>& inputs,
                                                 const c10d::AllgatherOptions& opts) {
  const char* api = "allgather_into_tensor_coalesced";
  if (outputs.size() != inputs.size() || inputs.empty())
    bad(api, std::to_string(outputs.size()) + " outputs for " + std::to_string(inputs.size()) +
                 " inputs");
  auto all = std::make_shared<std::vector<Steps>>();
  for (size_t i = 0; i < inputs.size(); ++i) {
    sameKind(inputs[0], inputs[i], api);
    all->push_back(gatherSingleSteps(outputs[i], inputs[i], api));
  }
  return submit(c10d::OpType::ALLGATHER_INTO_TENSOR_COALESCED,
                "tessera:all_gather_into_tensor_coalesced", outputs, opts.asyncOp, groupOf(all),
                outputs[0]);
}

// ---- reduce-scatters ----------------------------------------------------------------------

TesseraBackend::Steps TesseraBackend::scatterSingleSteps(const at::Tensor& output,
                                                         const at::Tensor& input,
                                                         const c10d::ReduceOp& op,
                                                         const char* api) {
  checkTensor(input, api);
  sameKind(input, output, api);
  if (input.numel() != output.numel() * size_)
    bad(api, "the input has " + std::to_string(input.numel()) + " elements, but " +
                 std::to_string(size_) + " ranks of " + std::to_string(output.numel()) + " make " +
                 std::to_string(output.numel() * size_));
  at::Tensor inView = reduceView(input, op, api), outView = reduceView(output, op, api);
  checkReduce(inView.scalar_type(), op, api);
  DenseP din = dense(inView), dout = dense(outView);
  auto spec = std::make_shared<ReduceSpec>();
  Steps s;
  s.issue = [this, din, dout, op, spec] {
    tsrComm_t c = commFor(din->t);
    *spec = makeReduce(din->t.scalar_type(), op, c, din->t.is_cuda());
    check(tsrReduceScatter(din->ptr(), dout->ptr(), dout->t.numel(), spec->dtype, spec->op, c,
                           static_cast<tsrStream_t>(streamFor(din->t))),
          "tsrReduceScatter");
  };
  s.finish = [dout, spec] {
    spec->release();
    dout->back();
  };
  s.tensors = uses({din, dout});
  if (checkCalls_) s.signature = callSignature(api, output, reduceOpName(op));
  return s;
}

Work TesseraBackend::reduce_scatter(std::vector<at::Tensor>& outputs,
                                    std::vector<std::vector<at::Tensor>>& inputs,
                                    const c10d::ReduceScatterOptions& opts) {
  const char* api = "reduce_scatter";
  const at::Tensor& out = single(outputs, api);
  if (inputs.size() != 1) bad(api, "takes one input list per process");
  auto& ins = inputs[0];
  if (ins.size() != static_cast<size_t>(size_))
    bad(api, "the input list has " + std::to_string(ins.size()) + " tensors for " +
                 std::to_string(size_) + " ranks");
  for (const at::Tensor& i : ins) sameKind(out, i, api, true);
  // The blocks side by side, as tessera's input (copied on the queue, where the call runs).
  at::Tensor flat = at::empty({size_ * out.numel()}, out.options());
  Steps s = scatterSingleSteps(out, flat, opts.reduceOp, api);
  std::vector<at::Tensor> insCopy = ins;
  auto issue = std::move(s.issue);
  s.issue = [flat, insCopy, issue] {
    for (size_t i = 0; i < insCopy.size(); ++i)
      flat.narrow(0, i * insCopy[i].numel(), insCopy[i].numel()).copy_(insCopy[i].reshape({-1}));
    issue();
  };
  s.tensors.insert(s.tensors.end(), ins.begin(), ins.end());
  return submit(c10d::OpType::REDUCE_SCATTER, "tessera:reduce_scatter", {out}, opts.asyncOp,
                std::move(s), out);
}

Work TesseraBackend::reduce_scatter_single(at::Tensor& output, at::Tensor& input,
                                           const c10d::ReduceScatterOptions& opts) {
  Steps s = scatterSingleSteps(output, input, opts.reduceOp, "reduce_scatter_tensor");
  return submit(c10d::OpType::_REDUCE_SCATTER_BASE, "tessera:reduce_scatter_tensor", {output},
                opts.asyncOp, std::move(s), output);
}

Work TesseraBackend::reduce_scatter_single_coalesced(std::vector<at::Tensor>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::ReduceScatterOptions& opts) {
  const char* api = "reduce_scatter_tensor_coalesced";
  if (outputs.size() != inputs.size() || inputs.empty())
    bad(api, std::to_string(outputs.size()) + " outputs for " + std::to_string(inputs.size()) +
                 " inputs");
  auto all = std::make_shared<std::vector<Steps>>();
  for (size_t i = 0; i < inputs.size(); ++i) {
    sameKind(inputs[0], inputs[i], api);
    all->push_back(scatterSingleSteps(outputs[i], inputs[i], opts.reduceOp, api));
  }
  return submit(c10d::OpType::REDUCE_SCATTER_TENSOR_COALESCED,
                "tessera:reduce_scatter_tensor_coalesced", outputs, opts.asyncOp, groupOf(all),
                outputs[0]);
}

// The steps of several calls as one call's: their tessera calls in one group.
TesseraBackend::Steps TesseraBackend::groupOf(std::shared_ptr<std::vector<Steps>> all) {
  Steps s;
  s.issue = [all] {
    TsrGroup g;
    for (Steps& x : *all) x.issue();
    g.end();
  };
  s.finish = [all] {
    for (Steps& x : *all)
      if (x.finish) x.finish();
  };
  for (Steps& x : *all) s.tensors.insert(s.tensors.end(), x.tensors.begin(), x.tensors.end());
  return s;
}

}  // namespace tessera_torch
