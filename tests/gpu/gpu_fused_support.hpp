// CUDA and cuBLAS for the fused GPU test (test_gpu_fused.cpp), behind functions that return ""
// on success or a sentence, so the test itself needs no CUDA header. Without CUDA or cuBLAS in
// the build every function says so (the test skips before calling them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tessera::gputest {

// Whether this build has cuBLAS for the reference GEMMs; "" or why not.
std::string fusedCublasMissing();

// C (m x n floats, row-major) = A (m x k) * B (k x n), row-major 16-bit inputs (bf16 when
// `bf16`, else fp16), by cublasGemmEx with float accumulation on GPU 0 (the reference GEMM).
std::string cublasProduct(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b,
                          uint64_t m, uint64_t n, uint64_t k, bool bf16, std::vector<float>* c);

// Device memory of GPU 0 and streams (non-blocking) for the rank threads.
std::string deviceAlloc(size_t bytes, void** out);
void deviceFree(void* p);
std::string streamCreate(void** out);
void streamDestroy(void* s);
// Stream-ordered; the copies then wait for the stream (at most `seconds`).
std::string upload(void* dst, const void* src, size_t bytes, void* stream, double seconds);
std::string download(void* dst, const void* src, size_t bytes, void* stream, double seconds);
std::string fill(void* dst, int byte, size_t bytes, void* stream);
std::string streamWait(void* stream, double seconds);

}  // namespace tessera::gputest
