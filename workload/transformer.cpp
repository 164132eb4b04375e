// The transformer step generator (transformer.hpp).
#include "workload/transformer.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "core/log.hpp"

namespace tessera::workload {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;
constexpr int kAct = 2;  // activations and weights in bf16

struct Groups {
  int tp = -1, dp = -1, emb = -1;
};

// One simulated rank's program.
struct Emitter {
  const TransformerSpec& sp;
  Rank& rk;
  Groups g;
  int stage;
  int prevRank = -1, nextRank = -1;  // simulated ranks of the neighbouring stages
  uint16_t compute, tpStream, dpStream, sendStream, recvStream;
  int64_t last = -1;  // the compute stream's last op (the next one follows it anyway)

  Emitter(const TransformerSpec& s, Rank& r, Groups gr, int st) : sp(s), rk(r), g(gr), stage(st) {
    compute = streamOf(rk, "compute");
    tpStream = streamOf(rk, "tp");
    dpStream = streamOf(rk, "dp");
    sendStream = streamOf(rk, "pp-send");
    recvStream = streamOf(rk, "pp-recv");
  }

  uint32_t push(Op op, const std::string& id, uint16_t stream,
                std::initializer_list<int64_t> after = {}) {
    op.id = id;
    op.stream = stream;
    for (int64_t a : after)
      if (a >= 0) op.after.push_back(static_cast<uint32_t>(a));
    rk.ops.push_back(std::move(op));
    uint32_t i = static_cast<uint32_t>(rk.ops.size() - 1);
    if (stream == compute) last = i;
    return i;
  }
  uint32_t gemm(const std::string& id, uint64_t m, uint64_t n, uint64_t k, uint64_t batch = 1,
                std::initializer_list<int64_t> after = {}) {
    Op op;
    op.kind = OpKind::kGemm;
    op.gemm = GemmShape{m, n, k, batch, DType::kBf16};
    return push(op, id, compute, after);
  }
  uint32_t memory(const std::string& id, double bytes, std::initializer_list<int64_t> after = {}) {
    Op op;
    op.kind = OpKind::kMemory;
    op.bytes = bytes;
    return push(op, id, compute, after);
  }
  void afterAll(uint32_t op, const std::vector<int64_t>& waits) {
    for (int64_t a : waits)
      if (a >= 0) rk.ops[op].after.push_back(static_cast<uint32_t>(a));
  }
  uint32_t attention(const std::string& id, double flops, double bytes,
                     std::initializer_list<int64_t> after = {}) {
    Op op;
    op.kind = OpKind::kAttention;
    op.flops = flops;
    op.bytes = bytes;
    return push(op, id, compute, after);
  }
  uint32_t collective(const std::string& id, Collective c, int group, double bytes, uint16_t stream,
                      std::initializer_list<int64_t> after = {}) {
    Op op;
    op.kind = OpKind::kCollective;
    op.collective = c;
    op.group = group;
    op.bytes = bytes;
    return push(op, id, stream, after);
  }
  uint32_t fused(const std::string& id, FusedKind f, uint64_t m, uint64_t n, uint64_t k,
                 std::initializer_list<int64_t> after = {}) {
    Op op;
    op.kind = OpKind::kFused;
    op.fused = f;
    op.group = g.tp;
    op.gemm = GemmShape{m, n, k, 1, DType::kBf16};
    return push(op, id, compute, after);
  }
  uint32_t p2p(const std::string& id, OpKind kind, int peer, double bytes,
               std::initializer_list<int64_t> after = {}) {
    Op op;
    op.kind = kind;
    op.peer = peer;
    op.bytes = bytes;
    return push(op, id, kind == OpKind::kSend ? sendStream : recvStream, after);
  }

  // ---- One layer ----
  // A TP communication after a GEMM: on the compute stream (serial) or the tp stream, which the
  // chunk's next compute op then waits for (domino). Returns the op the next block waits for.
  int64_t tpComm(const std::string& id, Collective c, double bytes, bool onTpStream) {
    if (sp.tp == 1) return -1;
    if (!onTpStream) {
      collective(id, c, g.tp, bytes, compute);
      return -1;
    }
    return collective(id, c, g.tp, bytes, tpStream, {last});
  }

  // Forward of one layer for a chunk of `tokens` tokens (of a micro-batch of `batch` sequences of
  // `seq`; Domino's chunks split the tokens). `waitIn`: the op the chunk's first compute op waits
  // for; returns the op the chunk's next layer must wait for.
  // One block (0: attention, 1: MLP) of one layer's forward for a chunk.
  int64_t forwardBlock(const std::string& p, int block, uint64_t tokens, double attnScale,
                       int64_t waitIn, bool domino) {
    const uint64_t H = static_cast<uint64_t>(sp.hidden), T = static_cast<uint64_t>(sp.tp);
    const uint64_t F = static_cast<uint64_t>(sp.ffnSize());
    const bool spar = sp.sequenceParallel && sp.tp > 1;
    const bool fusedOps = sp.schedule == TpSchedule::kFused && sp.tp > 1;
    const double lnTokens = normTokens(tokens);
    const double actBytes = static_cast<double>(tokens) * H * kAct;
    int64_t wait = -1;
    if (block == 0) {
      memory(p + "ln1", 2 * lnTokens * H * kAct, {waitIn});
      if (spar && !fusedOps) tpComm(p + "ag1", Collective::kAllGather, actBytes, false);
      if (fusedOps && spar)
        fused(p + "ag_qkv", FusedKind::kAllGatherGemm, tokens, 3 * H / T, H);
      else
        gemm(p + "qkv", tokens, 3 * H / T, H);
      // The QKV projection's bias, added by a kernel of its own (Megatron-LM's linear layers:
      // `output = matmul(input, weight.t()); output = output + bias`); the other three layers'
      // biases go to the fused bias-GeLU and bias-dropout-add kernels.
      memory(p + "qkv_bias", 2.0 * tokens * 3 * H / T * kAct);
      attentionCore(p, attnScale, false);
      if (fusedOps) {
        fused(p + (spar ? "proj_rs" : "proj_ar"),
              spar ? FusedKind::kGemmReduceScatter : FusedKind::kGemmAllReduce, tokens, H, H / T);
      } else {
        gemm(p + "proj", tokens, H, H / T);
        wait = tpComm(p + (spar ? "rs1" : "ar1"),
                      spar ? Collective::kReduceScatter : Collective::kAllReduce, actBytes, domino);
      }
      return wait;
    }
    // MLP block: waits for the attention block's collective (domino: only this chunk's).
    memory(p + "drop1", dropAddBytes(lnTokens), {waitIn});
    memory(p + "ln2", 2 * lnTokens * H * kAct);
    if (spar && !fusedOps) tpComm(p + "ag2", Collective::kAllGather, actBytes, false);
    if (fusedOps && spar)
      fused(p + "ag_fc1", FusedKind::kAllGatherGemm, tokens, F / T, H);
    else
      gemm(p + "fc1", tokens, F / T, H);
    memory(p + "gelu", 2.0 * tokens * F / T * kAct);
    if (fusedOps) {
      fused(p + (spar ? "fc2_rs" : "fc2_ar"),
            spar ? FusedKind::kGemmReduceScatter : FusedKind::kGemmAllReduce, tokens, H, F / T);
    } else {
      gemm(p + "fc2", tokens, H, F / T);
      wait = tpComm(p + (spar ? "rs2" : "ar2"),
                    spar ? Collective::kReduceScatter : Collective::kAllReduce, actBytes, domino);
    }
    return wait;  // this layer's last bias-dropout-add waits for it (Deferred)
  }

  // Attention's core: FlashAttention as one kernel, or Megatron-LM's batched GEMMs (QK^T, PV)
  // around a fused softmax and dropout. attnScale: the chunk's share of the sequence's queries.
  void attentionCore(const std::string& p, double attnScale, bool backward) {
    const double H = sp.hidden, T = sp.tp, S = sp.seq, B = sp.microBatch, A = sp.heads;
    const double heads = A / T, dh = H / A;
    if (decodeCtx > 0) {
      // One new token per sequence against the KV cache of decodeCtx tokens: QK^T and PV over
      // the context, the cache's keys and values read once.
      attention(p + "attn_decode", 4 * B * decodeCtx * H / T, 2 * B * decodeCtx * H / T * kAct);
      return;
    }
    if (sp.flashAttention) {
      // QK^T and PV, 2 FLOPs per MAC, over the causal mask's lower triangle only: FlashAttention
      // skips the blocks above the diagonal (and its measured share of the peak, below, counts
      // a causal kernel's FLOPs so: FlashAttention-2's benchmarks halve them).
      double flops = 0.5 * 4 * B * S * S * H / T * attnScale;
      double bytes = 4 * B * S * H / T * kAct * attnScale;
      if (backward)
        attention(p + "attn_bwd", 2.5 * flops, 2.5 * bytes);  // the backward recomputes QK^T
      else
        attention(p + "attn", flops, bytes);
      return;
    }
    const uint64_t batch = static_cast<uint64_t>(B * heads);
    const uint64_t q = static_cast<uint64_t>(S * attnScale), s = static_cast<uint64_t>(S);
    const uint64_t d = static_cast<uint64_t>(dh);
    const double scores = B * heads * S * S * attnScale * kAct;
    if (!backward) {
      gemm(p + "qk", q, s, d, batch);
      // Softmax in and out, dropout in and out and its 1-byte mask.
      memory(p + "softmax", 4.5 * scores);
      gemm(p + "pv", q, d, s, batch);
      // The context from [b, heads, s, d] to [s, b, heads, d]: `permute(...).contiguous()`.
      memory(p + "ctx_copy", 2 * B * q * heads * d * kAct);
    } else {
      gemm(p + "dpv_dp", q, s, d, batch);  // dP = dO V^T
      gemm(p + "dpv_dv", s, d, q, batch);  // dV = P^T dO
      // Dropout's backward (gradient in and out, the mask in), softmax's (gradient and output in,
      // gradient out).
      memory(p + "softmax_bwd", 5.5 * scores);
      gemm(p + "dqk_dq", q, d, s, batch);  // dQ = dS K
      gemm(p + "dqk_dk", s, d, q, batch);  // dK = dS^T Q
      // Q, K and V are views split from the QKV GEMM's output: their gradients are concatenated
      // into its gradient (the split's backward).
      memory(p + "qkv_cat_bwd", 2 * B * q * 3 * heads * d * kAct);
    }
  }

  // One block (1: MLP, 0: attention) of one layer's backward for a chunk.
  int64_t backwardBlock(const std::string& p, int block, uint64_t tokens, double attnScale,
                        int64_t waitIn, bool domino) {
    const uint64_t H = static_cast<uint64_t>(sp.hidden), T = static_cast<uint64_t>(sp.tp);
    const uint64_t F = static_cast<uint64_t>(sp.ffnSize());
    const bool spar = sp.sequenceParallel && sp.tp > 1;
    const bool fusedOps = sp.schedule == TpSchedule::kFused && sp.tp > 1;
    const double lnTokens = normTokens(tokens);
    const double actBytes = static_cast<double>(tokens) * H * kAct;
    int64_t wait = -1;
    // Each bias's gradient is a reduction over the tokens of its output's gradient, a kernel of
    // its own after the op whose backward makes that gradient.
    if (block == 1) {
      memory(p + "drop2_bwd", 3 * lnTokens * H * kAct, {waitIn});
      memory(p + "fc2_bias_bwd", lnTokens * H * kAct);
      if (fusedOps && spar) {
        fused(p + "ag_fc2_dgrad", FusedKind::kAllGatherGemm, tokens, F / T, H);
      } else {
        if (spar) tpComm(p + "ag_g2", Collective::kAllGather, actBytes, false);
        gemm(p + "fc2_dgrad", tokens, F / T, H);
      }
      gemm(p + "fc2_wgrad", F / T, H, tokens);
      memory(p + "gelu_bwd", 3.0 * tokens * F / T * kAct);
      memory(p + "fc1_bias_bwd", 1.0 * tokens * F / T * kAct);
      // With sequence parallelism the layer's input is kept split: it is all-gathered again for
      // the weight gradient, before the input-gradient GEMM; Megatron-LM (asynchronous backward)
      // runs it on the tp stream beside that GEMM, the serial schedule before it.
      const int64_t input = spar && !fusedOps ? tpComm(p + "ag_x2", Collective::kAllGather,
                                                       actBytes, domino || sp.tpAsyncBackward)
                                              : -1;
      if (fusedOps) {
        fused(p + (spar ? "fc1_dgrad_rs" : "fc1_dgrad_ar"),
              spar ? FusedKind::kGemmReduceScatter : FusedKind::kGemmAllReduce, tokens, H, F / T);
      } else {
        gemm(p + "fc1_dgrad", tokens, H, F / T);
        wait = tpComm(p + (spar ? "rs_g2" : "ar_g2"),
                      spar ? Collective::kReduceScatter : Collective::kAllReduce, actBytes,
                      domino || sp.tpAsyncBackward);
      }
      gemm(p + "fc1_wgrad", H, F / T, tokens, 1, {input});  // beside the collective: dY and X
      return wait;
    }
    memory(p + "ln2_bwd", lnBwdBytes(lnTokens), {waitIn});
    memory(p + "drop1_bwd", 3 * lnTokens * H * kAct);
    memory(p + "proj_bias_bwd", lnTokens * H * kAct);
    if (fusedOps && spar) {
      fused(p + "ag_proj_dgrad", FusedKind::kAllGatherGemm, tokens, H / T, H);
    } else {
      if (spar) tpComm(p + "ag_g1", Collective::kAllGather, actBytes, false);
      gemm(p + "proj_dgrad", tokens, H / T, H);
    }
    gemm(p + "proj_wgrad", H / T, H, tokens);
    if (sp.recomputeSelective && !sp.flashAttention) attentionCore(p + "re.", attnScale, false);
    attentionCore(p, attnScale, true);
    wait = -1;
    const int64_t input = spar && !fusedOps ? tpComm(p + "ag_x1", Collective::kAllGather, actBytes,
                                                     domino || sp.tpAsyncBackward)
                                            : -1;
    if (fusedOps) {
      fused(p + (spar ? "qkv_dgrad_rs" : "qkv_dgrad_ar"),
            spar ? FusedKind::kGemmReduceScatter : FusedKind::kGemmAllReduce, tokens, H, 3 * H / T);
    } else {
      gemm(p + "qkv_dgrad", tokens, H, 3 * H / T);
      wait = tpComm(p + (spar ? "rs_g1" : "ar_g1"),
                    spar ? Collective::kReduceScatter : Collective::kAllReduce, actBytes,
                    domino || sp.tpAsyncBackward);
    }
    gemm(p + "qkv_wgrad", H, 3 * H / T, tokens, 1, {input});
    memory(p + "qkv_bias_bwd", 1.0 * tokens * 3 * H / T * kAct);
    return wait;  // this layer's ln1_bwd waits for it (Deferred)
  }

  // A layer's last memory-bound op after its last TP collective (the forward's second
  // bias-dropout-add, the backward's ln1_bwd) is deferred: it runs first in the chunk's next block
  // of computation, after that collective, so that with Domino the next chunk's block (queued
  // before it on the compute stream) does not wait for this chunk's collective. A chunk's pending
  // op: its id and bytes (empty id: none).
  struct Deferred {
    std::string id;
    double bytes = 0;
  };
  // Runs chunk c's deferred op, if any, after its wait; the chunk then has nothing to wait for.
  void runDeferred(std::vector<Deferred>* d, std::vector<int64_t>* wait, size_t c) {
    if ((*d)[c].id.empty()) return;
    memory((*d)[c].id, (*d)[c].bytes, {(*wait)[c]});
    (*wait)[c] = -1;
    (*d)[c].id.clear();
  }
  void runDeferred(std::vector<Deferred>* d, std::vector<int64_t>* wait) {
    for (size_t c = 0; c < d->size(); ++c) runDeferred(d, wait, c);
  }
  // The bias-dropout-add's bytes: the input and the residual in, the output out, and dropout's
  // 1-byte mask.
  double dropAddBytes(double tokens) const { return 3.5 * tokens * sp.hidden * kAct; }
  // A layernorm's backward (Megatron-LM's and apex's fused kernels): the scale and shift's
  // partial gradients read the output's gradient and the input, then the input's gradient reads
  // both again and is written.
  double lnBwdBytes(double tokens) const { return 5 * tokens * sp.hidden * kAct; }
  double normTokens(uint64_t tokens) const {
    return sp.sequenceParallel && sp.tp > 1 ? static_cast<double>(tokens) / sp.tp
                                            : static_cast<double>(tokens);
  }

  // One layer's forward: block by block, each block chunk by chunk (Domino: one chunk's
  // collective runs beside the next chunk's block).
  void forwardLayer(const std::string& m, int l, int chunks, uint64_t chunkTokens, double scale,
                    std::vector<int64_t>* wait, std::vector<Deferred>* deferred, const char* tag) {
    const bool domino = chunks > 1;
    for (int block = 0; block < 2; ++block)
      for (int c = 0; c < chunks; ++c) {
        const size_t ci = static_cast<size_t>(c);
        std::string p =
            m + "l" + std::to_string(l) + (domino ? "c" + std::to_string(c) : "") + "." + tag;
        if (block == 0) runDeferred(deferred, wait, ci);
        (*wait)[ci] = forwardBlock(p, block, chunkTokens, scale, (*wait)[ci], domino);
        if (block == 1) (*deferred)[ci] = {p + "drop2", dropAddBytes(normTokens(chunkTokens))};
      }
  }

  // Megatron-LM's embedding (mpu/layers.py VocabParallelEmbedding, model/language_model.py): each
  // TP rank looks up its slice of the vocabulary and zeroes the rows of the other ranks' tokens,
  // a TP all-reduce sums the slices (on the compute stream: the forward waits for it), then the
  // position embedding is added, [b, s] transposed to [s, b] (a copy) and dropout applied (with
  // sequence parallelism to the rank's part of the sequence).
  void embedding(const std::string& m, uint64_t tokens, int64_t waitIn) {
    const double act = static_cast<double>(tokens) * sp.hidden * kAct;
    memory(m + "embed", (sp.tp > 1 ? 4.0 : 2.0) * act, {waitIn});
    tpComm(m + "embed_ar", Collective::kAllReduce, act, false);
    memory(m + "embed_pos", 5.0 * act);  // the add (2 in, 1 out), the transpose (1 in, 1 out)
    memory(m + "embed_drop", 2.5 * normTokens(tokens) * sp.hidden * kAct);
  }

  // Megatron-LM's vocab-parallel cross entropy (mpu/cross_entropy.py) on the logits cast to fp32
  // (`output.float()`), bytes a logit: the cast (2 in, 4 out) and the max (4 in), subtracting it
  // (4 in, 4 out), exp and the sum (4 in, 4 out; 4 in), dividing by the sum (4 in, 4 out; kept for
  // the backward). With TP the max, the target's logit and the sum (4 bytes a token each) are
  // all-reduced over the TP group between them.
  void crossEntropy(const std::string& m, uint64_t tokens) {
    const double logits = static_cast<double>(tokens) * sp.vocab / sp.tp;
    const double perToken = static_cast<double>(tokens) * 4;
    memory(m + "xent", 10 * logits);
    tpComm(m + "xent_max_ar", Collective::kAllReduce, perToken, false);
    memory(m + "xent_sub", 8 * logits);
    tpComm(m + "xent_pred_ar", Collective::kAllReduce, perToken, false);
    memory(m + "xent_exp", 12 * logits);
    tpComm(m + "xent_sum_ar", Collective::kAllReduce, perToken, false);
    memory(m + "xent_div", 8 * logits);
  }

  // The stage's layers for one micro-batch, forward or backward (with recomputation first).
  // vc: the model chunk of an interleaved pipeline (0 otherwise).
  void pass(int mb, bool forward, int64_t waitIn, int vc) {
    const int perStage = sp.layers / (sp.pp * sp.interleave);
    const uint64_t tokens =
        static_cast<uint64_t>(sp.microBatch) * (decodeCtx > 0 ? 1 : static_cast<uint64_t>(sp.seq));
    const bool domino = sp.schedule == TpSchedule::kDomino && sp.tp > 1 && decodeCtx == 0;
    const int chunks = domino ? sp.dominoSplit : 1;
    const uint64_t chunkTokens = tokens / static_cast<uint64_t>(chunks);
    const double scale = 1.0 / chunks;
    const std::string m = label(mb, vc);
    const bool first = stage == 0 && vc == 0;
    const bool lastStage = stage == sp.pp - 1 && vc == sp.interleave - 1;
    const double H = sp.hidden, V = sp.vocab, T = sp.tp;
    std::vector<int64_t> wait(static_cast<size_t>(chunks), -1);
    std::vector<Deferred> deferred(static_cast<size_t>(chunks));
    wait[0] = waitIn;
    const bool spar = sp.sequenceParallel && sp.tp > 1;
    const bool fusedOps = sp.schedule == TpSchedule::kFused && sp.tp > 1;
    const double act = static_cast<double>(tokens) * H * kAct;
    if (forward) {
      if (first) embedding(m, tokens, waitIn);
      for (int l = 0; l < perStage; ++l)
        forwardLayer(m, l, chunks, chunkTokens, scale, &wait, &deferred, "");
      runDeferred(&deferred, &wait);
      if (lastStage) {
        afterAll(memory(m + "ln_f", 2.0 * normTokens(tokens) * H * kAct), wait);
        // The logits are a column-parallel layer over the tied embedding's table: with sequence
        // parallelism its input is all-gathered first.
        if (fusedOps && spar) {
          fused(m + "ag_logits", FusedKind::kAllGatherGemm, tokens, static_cast<uint64_t>(V / T),
                static_cast<uint64_t>(H));
        } else {
          if (spar) tpComm(m + "logits_ag", Collective::kAllGather, act, false);
          gemm(m + "logits", tokens, static_cast<uint64_t>(V / T), static_cast<uint64_t>(H));
        }
        if (sp.inference)
          memory(m + "xent", 3.0 * tokens * V / T * 4);  // the next token's choice
        else
          crossEntropy(m, tokens);
      } else if (domino) {
        afterAll(memory(m + "out", 1.0 * tokens * H * kAct), wait);
      }
      return;
    }
    if (lastStage) {
      // The softmax kept, less one at the target, times the loss's gradient (4 bytes in, 4 out a
      // logit), then cast back to 16 bits (4 in, 2 out).
      memory(m + "xent_bwd", 14.0 * tokens * V / T, {waitIn});
      // The logits' input gradient is summed over the TP group as a column-parallel layer's
      // (reduce-scattered with sequence parallelism, the input all-gathered again for the
      // weight gradient); the final layernorm's backward waits for it.
      const bool async = domino || sp.tpAsyncBackward;
      int64_t input = -1, grad = -1;
      if (fusedOps) {
        fused(m + (spar ? "logits_dgrad_rs" : "logits_dgrad_ar"),
              spar ? FusedKind::kGemmReduceScatter : FusedKind::kGemmAllReduce, tokens,
              static_cast<uint64_t>(H), static_cast<uint64_t>(V / T));
      } else {
        if (spar) input = tpComm(m + "logits_ag_x", Collective::kAllGather, act, async);
        gemm(m + "logits_dgrad", tokens, static_cast<uint64_t>(H), static_cast<uint64_t>(V / T));
        grad = tpComm(m + (spar ? "logits_rs_g" : "logits_ar_g"),
                      spar ? Collective::kReduceScatter : Collective::kAllReduce, act, async);
      }
      gemm(m + "logits_wgrad", static_cast<uint64_t>(V / T), static_cast<uint64_t>(H), tokens, 1,
           {input});
      memory(m + "ln_f_bwd", lnBwdBytes(normTokens(tokens)), {grad});
    }
    for (int l = perStage - 1; l >= 0; --l) {
      if (sp.recompute) {
        runDeferred(&deferred, &wait);  // the layer above's ln1_bwd, then this one's recomputation
        forwardLayer(m, l, chunks, chunkTokens, scale, &wait, &deferred, "re.");
        runDeferred(&deferred, &wait);
      }
      for (int block = 1; block >= 0; --block)
        for (int c = 0; c < chunks; ++c) {
          const size_t ci = static_cast<size_t>(c);
          std::string p =
              m + "l" + std::to_string(l) + (domino ? "c" + std::to_string(c) : "") + ".b.";
          if (block == 1) runDeferred(&deferred, &wait, ci);
          wait[ci] = backwardBlock(p, block, chunkTokens, scale, wait[ci], domino);
          // The input layernorm's backward, after the layer's input gradient is whole.
          if (block == 0) deferred[ci] = {p + "ln1_bwd", lnBwdBytes(normTokens(chunkTokens))};
        }
      // A separate accumulation kernel adds this micro-batch's gradients to the earlier ones'.
      if (mb > 0 && sp.gradAccumBytes > 0)
        memory(m + "l" + std::to_string(l) + ".grad_acc", layerParams() * sp.gradAccumBytes);
      if (mb == lastMicroBatch && sp.dpOverlap && sp.dp > 1) reduceGradients(m, l, 1);
    }
    // The first layer's ln1_bwd waits for its last TP collective (on the tp stream with Domino or
    // the asynchronous backward); the embedding's backward and the send to the previous stage come
    // after it.
    runDeferred(&deferred, &wait);
    // The embedding's backward: dropout's (the gradient in and out, the mask), the position
    // embedding's gradient (the gradient read and summed over the batch), the word embedding's
    // (the gradient read again, the rank's slice of the table zeroed and written).
    if (first)
      memory(m + "embed_bwd",
             2.5 * normTokens(tokens) * H * kAct + 2 * act + 2 * (V / T) * H * kAct);
    // The (tied) embedding's gradient, accumulated on the first and last stages.
    if ((first || lastStage) && mb > 0 && sp.gradAccumBytes > 0)
      memory(m + "embed_grad_acc", V * H / T * sp.gradAccumBytes);
  }
  int lastMicroBatch = -1;
  int wrapPrev = -1, wrapNext = -1;   // interleaved: the last stage for stage 0, and back
  int firstRank = -1, lastRank = -1;  // decode: the stages the sampled tokens go between
  int decodeCtx = 0;                  // decode: the KV cache's tokens (0: a full sequence)
  int decodeTok = -1;                 // decode: the token being generated

  std::string label(int mb, int vc) const {
    return "mb" + std::to_string(mb) + "." +
           (decodeTok >= 0 ? "t" + std::to_string(decodeTok) + "." : std::string()) +
           (sp.interleave > 1 ? "v" + std::to_string(vc) + "." : "");
  }

  double layerParams() const {
    const double H = sp.hidden;
    return (12 * H * H + 13 * H) / sp.tp;
  }
  // Gradient reduction of `layers` layers' parameters starting at layer l (overlapped: one
  // layer at a time on the dp stream).
  void reduceGradients(const std::string& m, int l, int layers) {
    const double bytes = layerParams() * layers * sp.gradBytes;
    const std::string id = "dp.grad." + m + "l" + std::to_string(l);
    if (sp.dpMode == DpMode::kZero)
      collective(id + ".rs", Collective::kReduceScatter, g.dp, bytes, dpStream, {last});
    else
      collective(id + ".ar", Collective::kAllReduce, g.dp, bytes, dpStream, {last});
  }

  void optimizer() {
    const int perStage = sp.layers / sp.pp;  // every model chunk of the stage
    const double H = sp.hidden, V = sp.vocab, T = sp.tp;
    const bool first = stage == 0, lastStage = stage == sp.pp - 1;
    double params = layerParams() * perStage;
    double embed = (first || lastStage) ? V * H / T : 0;
    std::vector<int64_t> waits;
    if (sp.dp > 1) {
      if (!sp.dpOverlap) {
        const double bytes = (params + embed) * sp.gradBytes;
        waits.push_back(collective(
            std::string("dp.grads.") + (sp.dpMode == DpMode::kZero ? "rs" : "ar"),
            sp.dpMode == DpMode::kZero ? Collective::kReduceScatter : Collective::kAllReduce, g.dp,
            bytes, dpStream, {last}));
      } else {
        if (embed > 0)
          waits.push_back(collective(
              "dp.grads.embed",
              sp.dpMode == DpMode::kZero ? Collective::kReduceScatter : Collective::kAllReduce,
              g.dp, embed * sp.gradBytes, dpStream, {last}));
        // The dp stream's last op: every layer's reduction is before it, in stream order.
        waits.push_back(lastOn(dpStream));
      }
    }
    if (g.emb >= 0)  // the tied embedding's gradient between the first and last stages
      waits.push_back(collective("emb.grads.ar", Collective::kAllReduce, g.emb,
                                 V * H / T * sp.gradBytes, dpStream, {last}));
    const double shard = sp.dpMode == DpMode::kZero ? sp.dp : 1;
    Op op;
    op.kind = OpKind::kMemory;
    // TransformerSpec::optimizerBytes per parameter (30: one fused Adam kernel).
    op.bytes = (params + embed) / shard * sp.optimizerBytes;
    afterAll(push(op, "optimizer", compute, {}), waits);
    if (sp.dpMode == DpMode::kZero && sp.dp > 1)
      collective("dp.params.ag", Collective::kAllGather, g.dp, (params + embed) * kAct, dpStream,
                 {last});
  }

  int64_t lastOn(uint16_t stream) const {
    for (size_t i = rk.ops.size(); i-- > 0;)
      if (rk.ops[i].stream == stream) return static_cast<int64_t>(i);
    return -1;
  }

  // 1F1B: warm-up forwards, then one forward and one backward at a time, then the backwards.
  // Interleaved (Megatron-LM's virtual pipeline, `interleave` model chunks per stage): the k-th
  // forward is chunk (k / PP) mod v of micro-batch (k / (PP v)) PP + k mod PP, the k-th backward
  // the same micro-batch's chunk v - 1 - (k / PP) mod v, and the warm-up is
  // 2 (PP - s - 1) + (v - 1) PP forwards; the last stage's chunk c feeds stage 0's chunk c + 1.
  void step() {
    const int mbs = sp.microBatches();
    const int v = sp.interleave;
    lastMicroBatch = mbs - 1;
    const double act = static_cast<double>(sp.microBatch) * sp.seq * sp.hidden * kAct /
                       (sp.sequenceParallel && sp.tp > 1 ? sp.tp : 1);
    const bool firstStage = stage == 0, lastStageOfAll = stage == sp.pp - 1;
    auto fwdFrom = [&](int vc) { return !firstStage ? prevRank : vc > 0 ? wrapPrev : -1; };
    auto fwdTo = [&](int vc) { return !lastStageOfAll ? nextRank : vc < v - 1 ? wrapNext : -1; };
    // Megatron-LM's scatter/gather (SC'21, section 4.1): each TP rank sends its 1/TP of the
    // activation between stages, and the receiving TP group all-gathers the parts over NVLink
    // before using them. With sequence parallelism the activation is split already.
    const bool scatter = sp.ppScatterGather && sp.tp > 1 && !sp.sequenceParallel;
    const double wire = scatter ? act / sp.tp : act;
    auto arrive = [&](const std::string& id, int from) -> int64_t {
      const int64_t in = p2p(id, OpKind::kRecv, from, wire);
      if (!scatter) return in;
      return collective(id + ".gather", Collective::kAllGather, g.tp, act, compute, {in});
    };
    // Blocking exchanges (Megatron-LM 2021: each exchange ended in torch.cuda.synchronize()): the
    // compute stream goes on only when the send is done, not beside it.
    auto depart = [&](const std::string& id, int to) {
      const int64_t s = p2p(id, OpKind::kSend, to, wire, {last});
      if (!sp.ppBlocking) return;
      Op done;
      done.kind = OpKind::kDelay;
      done.us = 0;
      push(done, id + ".done", compute, {s});
    };
    auto fwd = [&](int mb, int vc) {
      int64_t in = -1;
      if (int from = fwdFrom(vc); from >= 0) in = arrive(label(mb, vc) + "recv_act", from);
      pass(mb, true, in, vc);
      if (int to = fwdTo(vc); to >= 0) depart(label(mb, vc) + "send_act", to);
    };
    auto bwd = [&](int mb, int vc) {
      int64_t in = -1;
      if (int from = fwdTo(vc); from >= 0) in = arrive(label(mb, vc) + "recv_grad", from);
      pass(mb, false, in, vc);
      if (int to = fwdFrom(vc); to >= 0) depart(label(mb, vc) + "send_grad", to);
    };
    const int total = mbs * v;
    auto mbOf = [&](int k) { return (k / (sp.pp * v)) * sp.pp + k % sp.pp; };
    auto fwdK = [&](int k) { fwd(v == 1 ? k : mbOf(k), v == 1 ? 0 : (k / sp.pp) % v); };
    auto bwdK = [&](int k) { bwd(v == 1 ? k : mbOf(k), v == 1 ? 0 : v - 1 - (k / sp.pp) % v); };
    if (sp.inference) {
      const double ids = 4.0 * sp.microBatch;
      for (int k = 0; k < total; ++k) {
        fwdK(k);
        if (sp.decodeTokens > 0 && firstRank >= 0)  // the prefill's sampled tokens
          p2p(label(k, 0) + "send_ids", OpKind::kSend, firstRank, ids, {last});
      }
      // Decode: each micro-batch's next token through every stage; the last stage's sampled
      // tokens (4 bytes a sequence) go back to the first stage before the next one starts.
      for (int tok = 0; tok < sp.decodeTokens; ++tok) {
        decodeTok = tok;
        decodeCtx = sp.seq + tok + 1;
        for (int mb = 0; mb < mbs; ++mb) {
          int64_t in = -1;
          if (stage == 0 && lastRank >= 0)
            in = p2p(label(mb, 0) + "recv_ids", OpKind::kRecv, lastRank, ids);
          if (stage > 0) in = p2p(label(mb, 0) + "recv_act", OpKind::kRecv, prevRank, act / sp.seq);
          pass(mb, true, in, 0);
          if (stage + 1 < sp.pp)
            p2p(label(mb, 0) + "send_act", OpKind::kSend, nextRank, act / sp.seq, {last});
          else if (firstRank >= 0 && tok + 1 < sp.decodeTokens)
            p2p(label(mb, 0) + "send_ids", OpKind::kSend, firstRank, ids, {last});
        }
      }
      return;
    }
    const int warmup =
        std::min(v == 1 ? sp.pp - stage - 1 : 2 * (sp.pp - stage - 1) + (v - 1) * sp.pp, total);
    int f = 0, b = 0;
    for (; f < warmup; ++f) fwdK(f);
    while (f < total) {
      fwdK(f++);
      bwdK(b++);
    }
    while (b < total) bwdK(b++);
    optimizer();
  }
};

}  // namespace

const char* tpScheduleName(TpSchedule s) {
  switch (s) {
    case TpSchedule::kSerial: return "serial";
    case TpSchedule::kDomino: return "domino";
    case TpSchedule::kFused: return "fused";
  }
  return "?";
}

Result tpScheduleParse(const std::string& s, TpSchedule* out) {
  for (TpSchedule t : {TpSchedule::kSerial, TpSchedule::kDomino, TpSchedule::kFused})
    if (s == tpScheduleName(t)) {
      *out = t;
      return tsrSuccess;
    }
  return TSR_FAIL(tsrInvalidArgument, "unknown TP schedule \"%s\" (serial, domino, fused)",
                  s.c_str());
}

double transformerParameters(const TransformerSpec& sp) {
  const double l = sp.layers, h = sp.hidden;
  return 12 * l * h * h * (1 + 13 / (12 * h)) + (static_cast<double>(sp.vocab) + sp.seq) * h;
}

double transformerMemoryBytes(const TransformerSpec& sp) {
  const double h = sp.hidden, a = sp.heads, s = sp.seq, b = sp.microBatch, t = sp.tp;
  const double layers = static_cast<double>(sp.layers) / sp.pp;
  const double params = layers * (12 * h * h + 13 * h) / t + static_cast<double>(sp.vocab) * h / t;
  const double states = sp.dpMode == DpMode::kZero ? 16.0 / sp.dp : 16.0;
  // The attention scores' 5 a s / h (softmax in, dropout mask and out): not kept with selective
  // recomputation or FlashAttention.
  const double scores = sp.recomputeSelective || sp.flashAttention ? 0 : 5 * a * s / h;
  double perLayer = sp.sequenceParallel && sp.tp > 1 ? s * b * h / t * (34 + scores)
                                                     : s * b * h * (10 + 24 / t + scores / t);
  double inFlight = sp.inference ? 1 : sp.pp;
  if (sp.interleave > 1 && !sp.inference)
    inFlight = sp.pp * (1 + (sp.pp - 1.0) / (sp.pp * sp.interleave));
  double acts =
      sp.recompute ? inFlight * layers * 2 * s * b * h + perLayer : inFlight * layers * perLayer;
  if (sp.inference) {  // one layer's activations at a time, and the KV cache of every token
    acts = perLayer + 2.0 * layers * (static_cast<double>(sp.globalBatch) / sp.dp) *
                          (sp.seq + sp.decodeTokens) * h / t * kAct;
  }
  return params * (2 + (sp.inference ? 0 : states)) + acts;
}

double megatronModelFlops(const TransformerSpec& sp) {
  const double B = sp.globalBatch, s = sp.seq, l = sp.layers, h = sp.hidden, V = sp.vocab;
  const double base = 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
  if (sp.inference) return base / 3;
  return sp.recompute ? base * 4 / 3 : base;
}

Result makeTransformerStep(const TransformerSpec& sp, Workload* out) {
  auto bad = [&](const char* what) {
    return TSR_FAIL(tsrInvalidArgument, "transformer %s: %s", sp.name.c_str(), what);
  };
  if (sp.layers < 1 || sp.hidden < 1 || sp.heads < 1 || sp.seq < 1 || sp.vocab < 1 ||
      sp.microBatch < 1 || sp.globalBatch < 1 || sp.tp < 1 || sp.pp < 1 || sp.dp < 1)
    return bad("every size must be at least 1");
  if (sp.layers % sp.pp != 0) return bad("the layers must divide evenly among the PP stages");
  if (sp.interleave < 1 || (sp.interleave > 1 && sp.pp < 2) ||
      sp.layers % (sp.pp * sp.interleave) != 0)
    return bad("interleaving needs PP > 1 and the layers to divide evenly into PP x chunks");
  if (sp.decodeTokens < 0 || (sp.decodeTokens > 0 && (!sp.inference || sp.interleave > 1)))
    return bad("decoding needs --inference and a plain (not interleaved) pipeline");
  if (sp.interleave > 1 && (sp.globalBatch / (sp.microBatch * sp.dp)) % sp.pp != 0)
    return bad("interleaving needs the micro-batches per replica to be a multiple of PP");
  if (sp.hidden % sp.heads != 0) return bad("the hidden size must be a multiple of the heads");
  if (sp.heads % sp.tp != 0 || sp.ffnSize() % sp.tp != 0 || sp.vocab % sp.tp != 0)
    return bad("the heads, FFN size and vocabulary must be multiples of TP");
  if (sp.globalBatch % (sp.microBatch * sp.dp) != 0)
    return bad("the global batch must be a multiple of micro-batch x DP");
  if (sp.tp > sp.gpusPerNode || sp.gpusPerNode % sp.tp != 0)
    return bad("TP must divide the GPUs of a node (TP groups stay inside a node)");
  const uint64_t tokens = static_cast<uint64_t>(sp.microBatch) * sp.seq;
  if (sp.schedule == TpSchedule::kDomino &&
      (sp.dominoSplit < 1 || tokens % static_cast<uint64_t>(sp.dominoSplit * sp.tp) != 0))
    return bad("domino: the micro-batch's tokens must split evenly into parts of TP rows");
  if (sp.gradBytes != 2 && sp.gradBytes != 4) return bad("gradient bytes must be 2 or 4");
  if (!(sp.optimizerBytes >= 0 && sp.optimizerBytes <= 1024))
    return bad("the optimizer's bytes per parameter must be in 0..1024");
  if (!(sp.gradAccumBytes >= 0 && sp.gradAccumBytes <= 1024))
    return bad("gradient accumulation's bytes per parameter must be in 0..1024");
  if (sp.recompute && sp.recomputeSelective)
    return bad("full and selective recomputation exclude each other");
  const int gpus = sp.gpus();
  if (gpus % sp.gpusPerNode != 0 && gpus > sp.gpusPerNode)
    return bad("the GPUs (TP x PP x DP) must fill whole nodes");

  Workload w;
  w.name = sp.name;
  w.gpu = sp.gpu;
  w.platform = sp.platform;
  w.nodes = std::max(1, gpus / sp.gpusPerNode);
  w.gpus = gpus;
  w.modelFlops = sp.inference && sp.decodeTokens > 0 ? 0 : megatronModelFlops(sp);
  auto gpuOf = [&](int t, int s, int d) { return d * sp.pp * sp.tp + s * sp.tp + t; };
  // Simulated ranks: every GPU (unfold) or one per stage.
  std::map<std::tuple<int, int, int>, int> index;
  for (int d = 0; d < (sp.unfold ? sp.dp : 1); ++d)
    for (int s = 0; s < sp.pp; ++s)
      for (int t = 0; t < (sp.unfold ? sp.tp : 1); ++t) {
        index[{t, s, d}] = static_cast<int>(w.ranks.size());
        Rank r;
        r.gpu = gpuOf(t, s, d);
        r.weight = sp.unfold ? 1 : sp.tp * sp.dp;
        w.ranks.push_back(r);
      }
  auto rankOf = [&](int t, int s, int d) {
    auto it = index.find({t, s, d});
    return it == index.end() ? -1 : it->second;
  };
  // A group of the GPUs `members` (t, s, d): its simulated members, real size and node span.
  auto addGroup = [&](const std::string& name, const std::vector<std::tuple<int, int, int>>& all) {
    Group g;
    g.name = name;
    g.size = static_cast<int>(all.size());
    std::set<int> nodes;
    for (auto [t, s, d] : all) {
      nodes.insert(gpuOf(t, s, d) / sp.gpusPerNode);
      int r = rankOf(t, s, d);
      if (r >= 0) g.members.push_back(r);
    }
    g.nodes = static_cast<int>(nodes.size());
    if (g.members.empty()) return -1;
    w.groups.push_back(g);
    return static_cast<int>(w.groups.size() - 1);
  };
  // Per simulated rank, the groups it is in.
  std::vector<Groups> groupsOf(w.ranks.size());
  for (int s = 0; s < sp.pp; ++s)
    for (int d = 0; d < sp.dp; ++d) {
      std::vector<std::tuple<int, int, int>> all;
      for (int t = 0; t < sp.tp; ++t) all.emplace_back(t, s, d);
      int gi = addGroup("tp.s" + std::to_string(s) + ".d" + std::to_string(d), all);
      for (auto [t, s2, d2] : all)
        if (int r = rankOf(t, s2, d2); r >= 0) groupsOf[static_cast<size_t>(r)].tp = gi;
    }
  for (int s = 0; s < sp.pp; ++s)
    for (int t = 0; t < sp.tp; ++t) {
      std::vector<std::tuple<int, int, int>> all;
      for (int d = 0; d < sp.dp; ++d) all.emplace_back(t, s, d);
      int gi = addGroup("dp.s" + std::to_string(s) + ".t" + std::to_string(t), all);
      for (auto [t2, s2, d] : all)
        if (int r = rankOf(t2, s2, d); r >= 0) groupsOf[static_cast<size_t>(r)].dp = gi;
    }
  if (sp.pp > 1 && !sp.inference)
    for (int t = 0; t < sp.tp; ++t)
      for (int d = 0; d < sp.dp; ++d) {
        std::vector<std::tuple<int, int, int>> all = {{t, 0, d}, {t, sp.pp - 1, d}};
        int gi = addGroup("emb.t" + std::to_string(t) + ".d" + std::to_string(d), all);
        for (auto [t2, s2, d2] : all)
          if (int r = rankOf(t2, s2, d2); r >= 0) groupsOf[static_cast<size_t>(r)].emb = gi;
      }
  for (auto& [key, r] : index) {
    auto [t, s, d] = key;
    Emitter e(sp, w.ranks[static_cast<size_t>(r)], groupsOf[static_cast<size_t>(r)], s);
    e.prevRank = s > 0 ? rankOf(t, s - 1, d) : -1;
    e.nextRank = s + 1 < sp.pp ? rankOf(t, s + 1, d) : -1;
    if (sp.pp > 1 && sp.inference && sp.decodeTokens > 0) {
      e.firstRank = s == sp.pp - 1 ? rankOf(t, 0, d) : -1;
      e.lastRank = s == 0 ? rankOf(t, sp.pp - 1, d) : -1;
    }
    if (sp.interleave > 1) {
      e.wrapPrev = s == 0 ? rankOf(t, sp.pp - 1, d) : -1;
      e.wrapNext = s == sp.pp - 1 ? rankOf(t, 0, d) : -1;
    }
    e.step();
  }
  TSR_CHECK(checkWorkload(w, "transformer " + sp.name));
  *out = std::move(w);
  return tsrSuccess;
}

}  // namespace tessera::workload
