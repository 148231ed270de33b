// Just enough of CUDA/HIP for g++ to build kernels.cu as host code: a grid runs block after
// block, each block's threads as real threads meeting at a real barrier, so the kernels'
// __syncthreads() logic is exercised as written, not stepped around.
#pragma once
#include <barrier>
#include <thread>
#include <vector>

struct aiscp_dim3 {
    unsigned x, y, z;
};
static thread_local aiscp_dim3 threadIdx;
static aiscp_dim3 blockIdx, blockDim;
static std::barrier<>* aiscp_block_barrier;

#define __global__
#define __device__
// One block runs at a time, so a function-local static is that block's shared memory.
#define __shared__ static

static inline void __syncthreads() { aiscp_block_barrier->arrive_and_wait(); }

// Runs `kernel` over `grid` blocks of `block` threads.
template <class F>
static void launch(unsigned grid, unsigned block, F kernel) {
    blockDim = {block, 1, 1};
    for (unsigned b = 0; b < grid; b++) {
        blockIdx = {b, 0, 0};
        std::barrier<> barrier(block);
        aiscp_block_barrier = &barrier;
        std::vector<std::thread> threads;
        for (unsigned t = 0; t < block; t++)
            threads.emplace_back([t, &kernel] {
                threadIdx = {t, 0, 0};
                kernel();
            });
        for (auto& t : threads) t.join();
    }
}
