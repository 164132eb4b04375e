// A generator of transformer training (and inference) steps as workloads (DESIGN.md,
// "Workloads"): a GPT decoder of `layers` layers, Megatron-LM's tensor parallelism (TP, with or
// without sequence parallelism), pipeline parallelism (PP, the 1F1B schedule) and data
// parallelism (DP: a gradient all-reduce, or ZeRO's reduce-scatter of gradients and all-gather of
// parameters; after the backward pass or overlapped with it).
//
// GPUs are numbered d * (PP * TP) + s * TP + t (data-parallel replica d, stage s, TP rank t), so a
// TP group fills a node's GPUs first, as Megatron-LM places them. By default the GPUs that run
// the same program at the same times are folded into one simulated rank per stage (weight TP *
// DP), whose TP and DP groups keep their real size and node span; `unfold` simulates every GPU
// (small configurations; a test shows the two agree).
//
// The TP communication's schedule:
// - serial: Megatron-LM's: each block's GEMMs, then its all-reduce (or reduce-scatter /
//   all-gather with sequence parallelism) on the compute stream, the next block waiting for it;
// - domino: Domino's (arXiv 2409.15241): the micro-batch's tokens are split in `dominoSplit`
//   parts; each part's collective runs on its own stream beside the next part's computation;
// - fused: tessera's fused GEMM+communication (GEMM+AllReduce without sequence parallelism,
//   AllGather+GEMM and GEMM+ReduceScatter with it).
#pragma once

#include <string>

#include "core/status.hpp"
#include "workload/workload.hpp"

namespace tessera::workload {

enum class TpSchedule : uint8_t { kSerial, kDomino, kFused };
enum class DpMode : uint8_t { kAllReduce, kZero };
const char* tpScheduleName(TpSchedule s);
Result tpScheduleParse(const std::string& s, TpSchedule* out);

struct TransformerSpec {
  std::string name = "gpt";
  int layers = 24, hidden = 2048, heads = 16, ffn = 0, seq = 2048, vocab = 51200;
  int microBatch = 1, globalBatch = 8;
  int tp = 1, pp = 1, dp = 1;
  int interleave = 1;  // model chunks per pipeline stage (Megatron-LM's virtual pipeline)
  bool sequenceParallel = false;
  bool recompute = false;  // full activation recomputation (Megatron-LM's "full")
  // Selective activation recomputation (Korthikanti et al., MLSys 2023; Megatron-LM's
  // "selective"): only attention's core (QK^T, softmax, dropout, PV, the context's copy) again
  // before its backward, its s^2 activations never kept. With FlashAttention there is nothing
  // more to recompute (its backward recomputes the scores already). Not with `recompute`.
  bool recomputeSelective = false;
  bool flashAttention = false;  // attention as one kernel; otherwise batched GEMMs and a softmax
  TpSchedule schedule = TpSchedule::kSerial;
  int dominoSplit = 2;
  DpMode dpMode = DpMode::kAllReduce;
  bool dpOverlap = false;  // each layer's gradients reduced as its last backward ends
  bool inference = false;  // forward passes only (a prefill of every micro-batch)
  int decodeTokens = 0;    // inference: then this many tokens generated per sequence (KV cache)
  int gradBytes = 4;       // gradients reduced in fp32 (Megatron-LM's default)
  // The optimizer step's memory traffic per parameter (of the rank's share; ZeRO divides it by
  // DP). 30: one fused Adam kernel (fp32 parameter, gradient, m, v read; parameter, m, v written;
  // the 16-bit copy written). Frameworks that run the mixed-precision step as several kernels
  // move more: Megatron-LM's (megatron/optimizer/optimizer.py) copies the 16-bit gradients to
  // fp32, unscales them, takes their norm, runs Adam, then copies the parameters back to 16 bits
  // (perf/sim_workload_validate.sh counts its bytes).
  double optimizerBytes = 30;
  // Gradient accumulation across micro-batches as a kernel of its own, bytes per parameter for
  // each micro-batch after the first (after each layer's backward): 6 for autograd's 16-bit
  // `grad += new` (Megatron-LM of 2021 without contiguous buffers). 0: accumulated inside the
  // weight-gradient GEMM (Megatron-LM's gradient_accumulation_fusion, its default since 2022).
  double gradAccumBytes = 0;
  // Pipeline exchanges as Megatron-LM of 2021 made them (NVIDIA/Megatron-LM, commit de7dc40,
  // megatron/p2p_communication.py): scatter/gather (with TP > 1 and no sequence parallelism, each
  // TP rank sends 1/TP of the activation and the receivers all-gather it; its default then), and
  // blocking (the compute stream waits for each send, which `torch.cuda.synchronize()` did).
  bool ppScatterGather = false;
  bool ppBlocking = false;
  // Megatron-LM's asynchronous TP all-reduce in the backward (its default since 2022,
  // `async_tensor_model_parallel_allreduce`, megatron/mpu/layers.py): a column-parallel layer's
  // input gradient is all-reduced (reduce-scattered with sequence parallelism) on the tp stream
  // beside its weight-gradient GEMM, and the next block waits for it. Serial schedule only (Domino
  // does so already; fused has no separate collective).
  bool tpAsyncBackward = false;
  std::string gpu = "h100", platform = "dgx-h100";
  int gpusPerNode = kPresetGpusPerNode;
  bool unfold = false;

  int ffnSize() const { return ffn > 0 ? ffn : 4 * hidden; }
  int gpus() const { return tp * pp * dp; }
  int microBatches() const { return globalBatch / (microBatch * dp); }
};

// Checks (divisibility, sizes) and builds the step.
Result makeTransformerStep(const TransformerSpec& spec, Workload* out);

// Memory per GPU of the first pipeline stage (the most loaded in 1F1B), bytes: weights, gradients
// and Adam's states at 18 bytes per parameter (bf16 weights, fp32 gradients, fp32 master weights,
// m and v; ZeRO divides the 16 of them other than the weights by DP), plus the activations of the
// micro-batches in flight (PP of them; interleaved: PP (1 + (PP - 1) / (PP v))) by Korthikanti et
// al. (MLSys 2023, "Reducing Activation Recomputation"): per layer s b h (10 + 24/t + 5 a s/(h t))
// bytes, s b h / t (34 + 5 a s / h) with sequence parallelism, 2 s b h with full recomputation
// (the layer's input; one layer's full activations on top while it is recomputed), and without
// the 5 a s / h term with selective recomputation or FlashAttention (the scores are not kept). An
// estimate:
// no fragmentation, workspace or communication buffers.
double transformerMemoryBytes(const TransformerSpec& spec);

// Parameters of the model (Megatron-LM's count: 12 l h^2 (1 + 13 / 12h) + (V + s) h).
double transformerParameters(const TransformerSpec& spec);
// The FLOPs of one step as Narayanan et al. (SC'21) count them: 72 B s l h^2 (1 + s / 6h +
// V / 16 l h), times 4/3 with full recomputation (their 96); forward only: a third of 72's.
// Selective recomputation's extra FLOPs are not counted: 72's is Korthikanti et al.'s model FLOPs
// (their MFU), and the 96 of full recomputation its hardware FLOPs (HFU) as Narayanan et al. have
// it.
double megatronModelFlops(const TransformerSpec& spec);

}  // namespace tessera::workload
