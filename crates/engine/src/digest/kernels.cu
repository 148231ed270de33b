// aiscp's digest kernels: BLAKE3 chaining values and CRC-64/NVME / CRC-32C of a slice that
// sits in device memory. Compiled at run time by NVRTC (CUDA) or hiprtc (HIP), and by g++
// for the CPU test (crates/engine/tests/it/kernel_source/), so: plain C++, no headers, only
// `__global__`, `__shared__`, `__syncthreads()`, threadIdx/blockIdx/blockDim.
//
// `data` is the slice's first byte and must be 4-byte aligned (a slot is 4096-aligned and
// a slice starts at its offset 0). Every kernel takes its sizes as arguments and checks its
// own thread index against them, so any grid that covers the work is right.

typedef unsigned char u8;
typedef unsigned int u32;
typedef unsigned long long u64;

// ---------------------------------------------------------------------------------------
// BLAKE3 (spec: https://github.com/BLAKE3-team/BLAKE3-specs), hash mode (key = IV)
// ---------------------------------------------------------------------------------------

#define B3_CHUNK_LEN 1024ull
#define B3_CHUNK_START 1u
#define B3_CHUNK_END 2u
#define B3_PARENT 4u

__device__ static inline u32 b3_iv(int i) {
    switch (i) {
    case 0: return 0x6A09E667u;
    case 1: return 0xBB67AE85u;
    case 2: return 0x3C6EF372u;
    case 3: return 0xA54FF53Au;
    case 4: return 0x510E527Fu;
    case 5: return 0x9B05688Cu;
    case 6: return 0x1F83D9ABu;
    default: return 0x5BE0CD19u;
    }
}

__device__ static inline u32 b3_rotr(u32 x, int n) { return (x >> n) | (x << (32 - n)); }

#define B3_G(a, b, c, d, x, y)                                                                \
    do {                                                                                    \
        s[a] = s[a] + s[b] + (x);                                                           \
        s[d] = b3_rotr(s[d] ^ s[a], 16);                                                    \
        s[c] = s[c] + s[d];                                                                 \
        s[b] = b3_rotr(s[b] ^ s[c], 12);                                                    \
        s[a] = s[a] + s[b] + (y);                                                           \
        s[d] = b3_rotr(s[d] ^ s[a], 8);                                                     \
        s[c] = s[c] + s[d];                                                                 \
        s[b] = b3_rotr(s[b] ^ s[c], 7);                                                     \
    } while (0)

// The compression function, keeping the first half of the output: the chaining value.
// `cv` is read and overwritten; `m` is the 64-byte block as 16 little-endian words.
__device__ static void b3_compress(u32 cv[8], const u32 m_in[16], u64 counter, u32 block_len,
                                   u32 flags) {
    u32 m[16];
    u32 s[16];
    for (int i = 0; i < 16; i++) m[i] = m_in[i];
    for (int i = 0; i < 8; i++) s[i] = cv[i];
    for (int i = 0; i < 4; i++) s[8 + i] = b3_iv(i);
    s[12] = (u32)counter;
    s[13] = (u32)(counter >> 32);
    s[14] = block_len;
    s[15] = flags;
    for (int r = 0; r < 7; r++) {
        B3_G(0, 4, 8, 12, m[0], m[1]);
        B3_G(1, 5, 9, 13, m[2], m[3]);
        B3_G(2, 6, 10, 14, m[4], m[5]);
        B3_G(3, 7, 11, 15, m[6], m[7]);
        B3_G(0, 5, 10, 15, m[8], m[9]);
        B3_G(1, 6, 11, 12, m[10], m[11]);
        B3_G(2, 7, 8, 13, m[12], m[13]);
        B3_G(3, 4, 9, 14, m[14], m[15]);
        if (r < 6) {
            // MSG_PERMUTATION = [2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8]
            u32 t[16];
            t[0] = m[2]; t[1] = m[6]; t[2] = m[3]; t[3] = m[10];
            t[4] = m[7]; t[5] = m[0]; t[6] = m[4]; t[7] = m[13];
            t[8] = m[1]; t[9] = m[11]; t[10] = m[12]; t[11] = m[5];
            t[12] = m[9]; t[13] = m[14]; t[14] = m[15]; t[15] = m[8];
            for (int i = 0; i < 16; i++) m[i] = t[i];
        }
    }
    for (int i = 0; i < 8; i++) cv[i] = s[i] ^ s[i + 8];
}

// The non-root chaining value of the chunk of `len` (0..=1024) bytes at `p`, whose index in
// the file is `counter`.
__device__ static void b3_chunk_cv(const u8* p, u32 len, u64 counter, u32 cv[8]) {
    for (int i = 0; i < 8; i++) cv[i] = b3_iv(i);
    u32 blocks = len == 0 ? 1 : (len + 63) / 64;
    for (u32 b = 0; b < blocks; b++) {
        u32 m[16];
        u32 off = b * 64;
        u32 block_len = len - off < 64 ? len - off : 64;
        if (block_len == 64) {
            const u32* w = (const u32*)(p + off);
            for (int i = 0; i < 16; i++) m[i] = w[i];
        } else {
            for (int i = 0; i < 16; i++) m[i] = 0;
            for (u32 i = 0; i < block_len; i++) m[i / 4] |= (u32)p[off + i] << (8 * (i % 4));
        }
        u32 flags = (b == 0 ? B3_CHUNK_START : 0u) | (b + 1 == blocks ? B3_CHUNK_END : 0u);
        b3_compress(cv, m, counter, block_len, flags);
    }
}

// One thread per chunk: `cvs[8*i..8*i+8]` = the non-root chaining value of the slice's chunk
// `i` (its file index is `first_chunk + i`), for i < max(1, ceil(len / 1024)).
extern "C" __global__ void aiscp_blake3_chunks(const u8* data, u64 len, u64 first_chunk,
                                               u32* cvs) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    u64 chunks = len == 0 ? 1 : (len + B3_CHUNK_LEN - 1) / B3_CHUNK_LEN;
    if (i >= chunks) return;
    u64 off = i * B3_CHUNK_LEN;
    u64 rest = len - off;
    u32 clen = (u32)(rest < B3_CHUNK_LEN ? rest : B3_CHUNK_LEN);
    u32 cv[8];
    b3_chunk_cv(data + off, clen, first_chunk + i, cv);
    for (int k = 0; k < 8; k++) cvs[i * 8 + k] = cv[k];
}

// One block per subtree: subtree `b` spans the slice's chunks
// `nodes[2b] .. nodes[2b] + nodes[2b+1]` (their chunk CVs from aiscp_blake3_chunks, reduced
// in place in `cvs`); `out[8*b..8*b+8]` gets its non-root chaining value. The tree is
// BLAKE3's left-balanced one: pairing neighbours level by level, an odd last node carried
// up unchanged, gives the same parents as "the left subtree is the largest power of two".
extern "C" __global__ void aiscp_blake3_subtrees(u32* cvs, const u64* nodes, u32* out) {
    u64 first = nodes[2 * blockIdx.x];
    u64 m = nodes[2 * blockIdx.x + 1];
    u32* base = cvs + first * 8;
    while (m > 1) {
        u64 pairs = m / 2;
        // Reads of one round come before its writes; a later round reads only above what
        // this one writes (index 2j >= j), so one barrier each way suffices.
        for (u64 at = 0; at < pairs; at += blockDim.x) {
            u64 j = at + threadIdx.x;
            u32 p[8];
            if (j < pairs) {
                u32 msg[16];
                for (int k = 0; k < 16; k++) msg[k] = base[2 * j * 8 + k];
                for (int k = 0; k < 8; k++) p[k] = b3_iv(k);
                b3_compress(p, msg, 0, 64, B3_PARENT);
            }
            __syncthreads();
            if (j < pairs)
                for (int k = 0; k < 8; k++) base[j * 8 + k] = p[k];
            __syncthreads();
        }
        if (m & 1) {
            if (threadIdx.x == 0)
                for (int k = 0; k < 8; k++) base[pairs * 8 + k] = base[(m - 1) * 8 + k];
            __syncthreads();
        }
        m = pairs + (m & 1);
    }
    if (threadIdx.x == 0)
        for (int k = 0; k < 8; k++) out[blockIdx.x * 8 + k] = base[k];
}

// ---------------------------------------------------------------------------------------
// CRCs: reflected, init and xorout all ones (so standalone CRCs combine as zlib's
// crc32_combine does: crc(A || B) = crc(A) * x^(8|B|) mod P  xor  crc(B)).
// kind 0: CRC-32C (Castagnoli, reflected poly 0x82F63B78);
// kind 1: CRC-64/NVME (reflected poly 0x9A6C9329AC4BC9B5).
// ---------------------------------------------------------------------------------------

__device__ static inline u64 crc_poly(u32 kind) {
    return kind == 0 ? 0x82F63B78ull : 0x9A6C9329AC4BC9B5ull;
}
__device__ static inline u64 crc_ones(u32 kind) {
    return kind == 0 ? 0xFFFFFFFFull : 0xFFFFFFFFFFFFFFFFull;
}
// The register bit that stands for x^0.
__device__ static inline u64 crc_top(u32 kind) {
    return kind == 0 ? 0x80000000ull : 0x8000000000000000ull;
}

// a * b mod P in the reflected representation (zlib's multmodp, any width).
__device__ static u64 crc_mulmod(u64 a, u64 b, u64 top, u64 poly) {
    u64 m = top, p = 0;
    if (a == 0) return 0;
    for (;;) {
        if (a & m) {
            p ^= b;
            if ((a & (m - 1)) == 0) break;
        }
        m >>= 1;
        b = (b & 1) ? (b >> 1) ^ poly : b >> 1;
    }
    return p;
}

// One thread per `block` bytes (a multiple of 4): `crcs[i]` = the standalone CRC of bytes
// `[i*block, min((i+1)*block, len))`. Launch with at least one thread per block of bytes.
extern "C" __global__ void aiscp_crc_blocks(const u8* data, u64 len, u64 block, u32 kind,
                                            u64* crcs) {
    __shared__ u64 table[256];
    u64 poly = crc_poly(kind);
    for (u32 i = threadIdx.x; i < 256; i += blockDim.x) {
        u64 t = i;
        for (int k = 0; k < 8; k++) t = (t & 1) ? (t >> 1) ^ poly : t >> 1;
        table[i] = t;
    }
    __syncthreads();
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    u64 count = (len + block - 1) / block;
    if (i >= count) return;
    u64 off = i * block;
    u64 end = len - off < block ? len : off + block;
    u64 crc = crc_ones(kind);
    u64 at = off;
    for (; at + 4 <= end; at += 4) {
        u32 w = *(const u32*)(data + at);
        crc = table[(crc ^ w) & 0xff] ^ (crc >> 8);
        crc = table[(crc ^ (w >> 8)) & 0xff] ^ (crc >> 8);
        crc = table[(crc ^ (w >> 16)) & 0xff] ^ (crc >> 8);
        crc = table[(crc ^ (w >> 24)) & 0xff] ^ (crc >> 8);
    }
    for (; at < end; at++) crc = table[(crc ^ data[at]) & 0xff] ^ (crc >> 8);
    crcs[i] = crc ^ crc_ones(kind);
}

// One block: combines the `count` CRCs from aiscp_crc_blocks (same `len`, `block`, `kind`)
// in place, pairwise level by level; `out[0]` = the standalone CRC of all `len` bytes.
extern "C" __global__ void aiscp_crc_combine(u64* crcs, u64 count, u64 len, u64 block,
                                             u32 kind, u64* out) {
    // x2n[k] = x^(2^k) mod P.
    __shared__ u64 x2n[64];
    u64 poly = crc_poly(kind), top = crc_top(kind);
    if (threadIdx.x == 0) {
        x2n[0] = top >> 1;
        for (int k = 1; k < 64; k++) x2n[k] = crc_mulmod(x2n[k - 1], x2n[k - 1], top, poly);
    }
    __syncthreads();
    u64 m = count;
    u64 span = block;
    while (m > 1) {
        u64 pairs = m / 2;
        for (u64 at = 0; at < pairs; at += blockDim.x) {
            u64 j = at + threadIdx.x;
            u64 c = 0;
            if (j < pairs) {
                u64 right_start = (2 * j + 1) * span;
                u64 right_end = (2 * j + 2) * span;
                if (right_end > len) right_end = len;
                // x^(8 * right_len) mod P, from the powers of x^(2^k).
                u64 n = right_end - right_start;
                u64 shift = top;
                for (int k = 3; n != 0; n >>= 1, k++)
                    if (n & 1) shift = crc_mulmod(x2n[k], shift, top, poly);
                c = crc_mulmod(shift, crcs[2 * j], top, poly) ^ crcs[2 * j + 1];
            }
            __syncthreads();
            if (j < pairs) crcs[j] = c;
            __syncthreads();
        }
        if (m & 1) {
            if (threadIdx.x == 0) crcs[pairs] = crcs[m - 1];
            __syncthreads();
        }
        m = pairs + (m & 1);
        span *= 2;
    }
    if (threadIdx.x == 0) out[0] = count == 0 ? 0 : crcs[0];
}
