/* A read torn by a truncate, as the Linux page cache can tear one (a buffered read, or an
 * O_DIRECT one on tmpfs): the first pread64 of the file AISCP_TEST_TORN_FILE whose answer
 * reaches past AISCP_TEST_TORN_AT
 * returns the bytes read, then cuts the file there and zeroes the rest of that page in the
 * answer, as truncate_pagecache zeroes the page holding the new end while a reader copies
 * it. With AISCP_TEST_TORN_THEN the file is cut again to that size before the read returns
 * (another truncate, or a rewrite, before anyone looks). It fires once per process and
 * creates AISCP_TEST_TORN_FIRED, so a test knows the tear happened. Loaded with LD_PRELOAD
 * into the aiscp under test. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#define PAGE 4096

static int fired;

static int is_the_file(int fd, const char *want)
{
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t len = readlink(link, path, sizeof path - 1);
    if (len < 0)
        return 0;
    path[len] = 0;
    return strcmp(path, want) == 0;
}

ssize_t pread64(int fd, void *buf, size_t count, off_t offset)
{
    static ssize_t (*real)(int, void *, size_t, off_t);
    if (!real)
        real = (ssize_t(*)(int, void *, size_t, off_t))dlsym(RTLD_NEXT, "pread64");
    ssize_t n = real(fd, buf, count, offset);
    const char *want = getenv("AISCP_TEST_TORN_FILE");
    const char *at = getenv("AISCP_TEST_TORN_AT");
    const char *mark = getenv("AISCP_TEST_TORN_FIRED");
    if (n <= 0 || !want || !at || !mark)
        return n;
    off_t cut = atoll(at);
    if (cut < offset || cut >= offset + n || !is_the_file(fd, want))
        return n;
    if (__atomic_exchange_n(&fired, 1, __ATOMIC_SEQ_CST))
        return n;
    if (truncate(want, cut) != 0)
        return n;
    off_t page_end = (cut + PAGE - 1) / PAGE * PAGE;
    if (page_end > offset + n)
        page_end = offset + n;
    memset((char *)buf + (cut - offset), 0, page_end - cut);
    const char *then = getenv("AISCP_TEST_TORN_THEN");
    if (then && truncate(want, atoll(then)) != 0)
        return n;
    close(open(mark, O_CREAT | O_WRONLY, 0600));
    return n;
}
