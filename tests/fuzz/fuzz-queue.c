/*
 * libFuzzer target for the backend's queue consumer: the input becomes the
 * shared memory a (broken) program left behind, slot headers, chunk headers,
 * cursor and records, and the workers read it live and post mortem.
 */
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "backend/backend.h"
#include "format/queue.h"

struct ctl {
    uint8_t flags;
    uint8_t state[2];
    uint8_t fill;
    uint32_t len[2];
    uint32_t thread[2];
    uint32_t threads, nslots;
    uint64_t seq[2];
    uint64_t pos;
    uint64_t base;
    uint32_t cflags[2];
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* stats alone has its chunks dealt out; with sharing every worker reads every chunk */
    const struct ml_module *mods[] = {ml_module_find("stats"), ml_module_find("sharing")};
    struct ml_backend_opts o = {.mods = mods, .nmods = 1, .max_threads = 1, .force_workers = 1};
    struct ml_backend *b;
    struct ml_q_header *h;
    struct ml_q_slot *sl;
    struct ml_brun run;
    struct ctl c;
    struct stat st;
    char err[256];
    size_t rest;

    if (size < sizeof(c))
        return 0;
    memcpy(&c, data, sizeof(c));
    data += sizeof(c);
    rest = size - sizeof(c);
    o.workers = 1 + (c.flags & 1);
    o.nmods = 1 + !!(c.flags & 8);
    if (ml_backend_new(&b, &o, err, sizeof(err)))
        return 0;
    if (fstat(ml_backend_fd(b), &st) || (h = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE,
                                                  MAP_SHARED, ml_backend_fd(b), 0)) == MAP_FAILED) {
        ml_backend_free(b);
        return 0;
    }
    h->attached_pid = 1;
    h->prog_base = c.flags & 2 ? (uint64_t)(uintptr_t)h : c.base;
    h->threads = c.threads;
    h->nslots = c.nslots;
    sl = ml_q_slot(h, 0);
    sl->state = ML_Q_SLOT_LIVE;
    sl->fill = c.fill;
    for (int k = 0; k < 2; k++) {
        size_t n = rest / 2 < h->chunk_size ? rest / 2 : h->chunk_size;
        memcpy(ml_q_chunk_data(h, 0, (uint32_t)k), data + (size_t)k * (rest / 2), n);
        sl->chunk[k].len = c.len[k];
        sl->chunk[k].thread = c.thread[k];
        sl->chunk[k].seq = c.seq[k];
        sl->chunk[k].flags = c.cflags[k];
        sl->chunk[k].readers = o.workers;
        sl->chunk[k].state = c.state[k] % 3;
    }
    /* the cursor: inside chunk fill when flag 4 (as a real one), else anything */
    sl->cur.pos = (uint8_t *)(uintptr_t)(c.flags & 4 ? h->prog_base + h->data_off +
                                                           (uint64_t)(c.fill & 1) * h->chunk_size +
                                                           c.pos % (h->chunk_size + 1)
                                                     : c.pos);
    if (ml_backend_start(b) == 0) {
        memset(&run, 0, sizeof(run));
        ml_backend_stop(b, &run);
    }
    munmap(h, (size_t)st.st_size);
    ml_backend_free(b);
    return 0;
}
