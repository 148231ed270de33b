// Runs kernels.cu on the CPU for tests/it/kernel_source.rs:
//   harness blake3 FILE START BLOCKDIM FIRST:COUNT...  one hex chaining value per node
//   harness crc KIND FILE BLOCK BLOCKDIM               the slice's CRC in hex
// FILE holds exactly the slice's bytes; START is its offset in the file being hashed.
#include "shim.h"
#include "../../../src/digest/kernels.cu"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

static std::vector<u32> slurp(const char* path, u64* len) {
    std::ifstream in(path, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    *len = bytes.size();
    // Held as words, so the bytes are 4-byte aligned as in device memory.
    std::vector<u32> words(bytes.size() / 4 + 1);
    std::memcpy(words.data(), bytes.data(), bytes.size());
    return words;
}

static unsigned blocks_for(u64 n, unsigned block) { return (unsigned)((n + block - 1) / block); }

int main(int argc, char** argv) {
    if (argc >= 5 && std::strcmp(argv[1], "blake3") == 0) {
        u64 len;
        std::vector<u32> data = slurp(argv[2], &len);
        const u8* p = (const u8*)data.data();
        u64 start = std::strtoull(argv[3], nullptr, 10);
        unsigned bd = (unsigned)std::strtoul(argv[4], nullptr, 10);
        u64 chunks = len == 0 ? 1 : (len + 1023) / 1024;
        std::vector<u32> cvs(chunks * 8);
        launch(blocks_for(chunks, bd), bd,
               [&] { aiscp_blake3_chunks(p, len, start / 1024, cvs.data()); });
        std::vector<u64> nodes;
        for (int i = 5; i < argc; i++) {
            char* colon;
            nodes.push_back(std::strtoull(argv[i], &colon, 10));
            nodes.push_back(std::strtoull(colon + 1, nullptr, 10));
        }
        unsigned n = (unsigned)(nodes.size() / 2);
        std::vector<u32> out(n * 8);
        launch(n, bd, [&] { aiscp_blake3_subtrees(cvs.data(), nodes.data(), out.data()); });
        for (unsigned b = 0; b < n; b++) {
            for (int k = 0; k < 8; k++)
                for (int byte = 0; byte < 4; byte++) std::printf("%02x", (out[b * 8 + k] >> (8 * byte)) & 0xff);
            std::printf("\n");
        }
        return 0;
    }
    if (argc == 6 && std::strcmp(argv[1], "crc") == 0) {
        u32 kind = (u32)std::strtoul(argv[2], nullptr, 10);
        u64 len;
        std::vector<u32> data = slurp(argv[3], &len);
        u64 block = std::strtoull(argv[4], nullptr, 10);
        unsigned bd = (unsigned)std::strtoul(argv[5], nullptr, 10);
        u64 count = (len + block - 1) / block;
        std::vector<u64> crcs(count + 1);
        launch(count == 0 ? 1 : blocks_for(count, bd), bd, [&] {
            aiscp_crc_blocks((const u8*)data.data(), len, block, kind, crcs.data());
        });
        u64 out = ~0ull;
        launch(1, bd, [&] { aiscp_crc_combine(crcs.data(), count, len, block, kind, &out); });
        std::printf("%016llx\n", out);
        return 0;
    }
    std::fprintf(stderr, "usage: harness blake3 FILE START BLOCKDIM FIRST:COUNT... | crc KIND FILE BLOCK BLOCKDIM\n");
    return 2;
}
