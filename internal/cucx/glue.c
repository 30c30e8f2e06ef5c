/* glue.c: every UCX callback and send path of package cucx (about 630
 * lines). It stays one file because all of it shares the worker's event
 * array, buffer pool and counters, which C would otherwise have to export
 * between translation units. */
#include "glue.h"
#include <ucs/config/global_opts.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- C-owned send buffers ----------------------------------------------
 * A send copies header and payload into one buffer that the operation owns
 * until UCX completes it (UCX 1.13 has no COPY_HEADER flag: the header
 * pointer is kept); a received frame that UCX does not hand over is copied
 * into one too. Buffers are recycled through per-size-class free lists so
 * that frames do not pay malloc, and with it fresh pages, on every send:
 * glibc hands large freed blocks back to the kernel, and each new one
 * faults its pages in again (16 conns of 1 MiB writes over tcp took 37k
 * page faults a second inside these copies and ran at a quarter of one
 * conn's rate). A class keeps pool_keep(cls) buffers for good; beyond
 * that, buffers stay pooled up to CUCX_POOL_MAX bytes in all while the pool
 * is in use, and cucx_trim_pool gives them back once it is idle. All pool
 * functions run with the worker lock held (Go side), so they need no lock. */
struct cucx_buf {
    cucx_worker_t *w;
    cucx_buf_t    *next;
    uint32_t       cls;
    uint32_t       pad;
    uint64_t       bytes;   /* payload bytes counted in w->inflight_bytes */
    cucx_ep_t     *ep;      /* whose inflight_bytes count them too (a reference) */
    uint64_t       pad2[4]; /* keep data 64-byte aligned */
    uint8_t        data[];
};

#define CUCX_MIN_CLASS 7 /* 128 B */
#define CUCX_MAX_CLASS 31
/* A buffer of class c holds 2^c bytes and CUCX_BUF_SLACK more, so that a
 * frame header on top of a power-of-two payload (a 1 MiB write as one tcp
 * frame) takes its class, not the next one up. */
#define CUCX_BUF_SLACK 256
/* The most bytes of buffers pooled beyond pool_keep, in all classes: what
 * one peer may have in flight each way (64 MiB of sends between flushes,
 * and 16 conns' 4 MiB receive windows of held frames). */
#define CUCX_POOL_MAX ((uint64_t)64 << 20)

static size_t buf_cap(uint32_t cls) { return ((size_t)1 << cls) + CUCX_BUF_SLACK; }

static uint32_t size_class(size_t n)
{
    uint32_t c = CUCX_MIN_CLASS;
    while (buf_cap(c) < n && c < CUCX_MAX_CLASS) {
        c++;
    }
    return c;
}

/* pool_keep is how many buffers of a class stay pooled however long the
 * pool is idle. */
static uint32_t pool_keep(uint32_t cls)
{
    if (cls <= 16) return 256; /* up to 64 KiB */
    if (cls <= 20) return 32;  /* up to 1 MiB */
    return 4;
}

/* pool_pop takes a buffer of class cls from the pool (NULL if none). */
static cucx_buf_t *pool_pop(cucx_worker_t *w, uint32_t cls)
{
    cucx_buf_t *b = w->pool[cls];
    if (b != NULL) {
        w->pool[cls] = b->next;
        w->pooled[cls]--;
        w->pooled_bytes -= buf_cap(cls);
    }
    return b;
}

static cucx_buf_t *buf_get(cucx_worker_t *w, size_t n)
{
    uint32_t cls = size_class(n);
    w->pool_gets++;
    cucx_buf_t *b = pool_pop(w, cls);
    if (b != NULL) {
        return b;
    }
    b = malloc(sizeof(*b) + buf_cap(cls));
    if (b == NULL) return NULL;
    b->w = w;
    b->cls = cls;
    w->bufs_alloc++;
    return b;
}

static void buf_put(cucx_buf_t *b)
{
    cucx_worker_t *w = b->w;
    uint32_t cls = b->cls;
    if (w->pooled[cls] >= pool_keep(cls) && w->pooled_bytes + buf_cap(cls) > CUCX_POOL_MAX) {
        free(b);
        return;
    }
    b->next = w->pool[cls];
    w->pool[cls] = b;
    w->pooled[cls]++;
    w->pooled_bytes += buf_cap(cls);
}

void cucx_trim_pool(cucx_worker_t *w)
{
    for (uint32_t c = CUCX_MIN_CLASS; c <= CUCX_MAX_CLASS; c++) {
        while (w->pooled[c] > pool_keep(c)) {
            free(pool_pop(w, c));
        }
    }
}

/* ---- events -------------------------------------------------------------- */

static cucx_event_t *ev_push(cucx_worker_t *w)
{
    if (w->nev == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 256;
        cucx_event_t *ev = realloc(w->ev, cap * sizeof(*ev));
        if (ev == NULL) return NULL;
        w->ev = ev;
        w->cap = cap;
    }
    cucx_event_t *e = &w->ev[w->nev++];
    memset(e, 0, offsetof(cucx_event_t, hdr));
    e->data = NULL;
    e->len = 0;
    e->ep = NULL;
    e->token = 0;
    e->from = 0;
    return e;
}

static void release_one(cucx_worker_t *w, void *ptr, uint32_t kind)
{
    if (kind == CUCX_DATA_DESC) {
        ucp_am_data_release(w->worker, ptr);
    } else if (kind == CUCX_DATA_BUF) {
        buf_put((cucx_buf_t*)((uint8_t*)ptr - offsetof(cucx_buf_t, data)));
    }
}

/* Releases data Go kept past its batch (see cucx_event_t.data_kind). */
void cucx_release_data(cucx_worker_t *w, const cucx_data_t *rel, size_t nrel)
{
    for (size_t i = 0; i < nrel; i++) {
        release_one(w, (void*)rel[i].ptr, rel[i].kind);
    }
}

/* Releases what Go has read of the last batch (events whose data_kind Go
 * cleared are kept: Go holds their data and releases it later). Events and
 * finished sends recorded since Go read the batch — UCX calls back outside
 * ucp_worker_progress too, e.g. inside a forced ucp_ep_close_nbx — stay
 * for the next batch. */
static void ep_unref(cucx_ep_t *ep);

void cucx_release_events(cucx_worker_t *w)
{
    size_t nread = w->nev_read;
    for (size_t i = 0; i < nread; i++) {
        cucx_event_t *e = &w->ev[i];
        release_one(w, e->data, e->data_kind);
        if (e->kind == CUCX_EV_EP_ERROR) {
            ep_unref(e->ep); /* the event's reference (ep_err_cb) */
        }
    }
    if (nread > 0) {
        memmove(w->ev, w->ev + nread, (w->nev - nread) * sizeof(*w->ev));
        w->nev -= nread;
        w->nev_read = 0;
    }
    if (w->zc_read != NULL) {
        cucx_zc_op_t **link = &w->zc_done;
        while (*link != w->zc_read) {
            link = &(*link)->next;
        }
        *link = NULL; /* detach the read suffix */
        while (w->zc_read != NULL) {
            cucx_zc_op_t *op = w->zc_read;
            w->zc_read = op->next;
            free(op);
        }
    }
}

static ucs_status_t am_cb(void *arg, const void *header, size_t header_length,
                          void *data, size_t length, const ucp_am_recv_param_t *param)
{
    cucx_worker_t *w = arg;
    cucx_event_t *e = ev_push(w);
    if (e == NULL) {
        return UCS_OK; /* out of memory: the frame is lost; sequence numbers tell the conn */
    }
    e->hdr_len = (uint32_t)header_length;
    if (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) {
        e->from = (uintptr_t)param->reply_ep; /* an identity only: never used as an ep here */
    }
    memcpy(e->hdr, header, header_length < CUCX_HDR_MAX ? header_length : CUCX_HDR_MAX);
    e->len = length;
    if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) || header_length > CUCX_HDR_MAX) {
        /* ucxnet sends eager only; a rendezvous offer or an oversized header
         * comes from a peer that does not speak our protocol. Returning
         * UCS_OK drops it. */
        e->kind = CUCX_EV_BAD;
        return UCS_OK;
    }
    e->kind = CUCX_EV_FRAME;
    if (length == 0) {
        return UCS_OK;
    }
    if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_DATA) {
        e->data = data;
        e->data_kind = CUCX_DATA_DESC;
        return UCS_INPROGRESS;
    }
    /* Data UCX does not hand over (tcp, short messages) is copied into a
     * pooled buffer: a fresh malloc per frame, freed when Read is done
     * with it, made glibc hand pages back and fault them in again (190k
     * page faults/s receiving 1 GB/s over tcp). */
    cucx_buf_t *b = length <= buf_cap(CUCX_MAX_CLASS) ? buf_get(w, length) : NULL;
    if (b == NULL) {
        e->kind = CUCX_EV_BAD;
        return UCS_OK;
    }
    memcpy(b->data, data, length);
    e->data = b->data;
    e->data_kind = CUCX_DATA_BUF;
    return UCS_OK;
}

static void ep_err_cb(void *arg, ucp_ep_h uep, ucs_status_t status)
{
    cucx_ep_t *ep = arg;
    (void)uep;
    cucx_event_t *e = ev_push(ep->w);
    if (e == NULL) return;
    e->kind = CUCX_EV_EP_ERROR;
    e->ep = ep;
    e->status = status;
    /* Go holds the event past the lock (HandleEvents): the struct must not
     * be freed, and its address reused by a new endpoint, before the batch
     * is released. */
    ep->refs++;
}

static void ep_unref(cucx_ep_t *ep)
{
    if (--ep->refs == 0) free(ep);
}

/* ---- context and worker ------------------------------------------------ */

/* cucx_quiet sets UCX's log level to fatal: its WARN and ERROR lines stay
 * out of the program's stderr (ucxnet's errors say what went wrong). */
void cucx_quiet(void)
{
    (void)ucs_global_opts_set_value("LOG_LEVEL", "fatal");
}

ucs_status_t cucx_open(cucx_worker_t **out, const char **names, const char **values, int n)
{
    ucs_status_t st;
    ucp_config_t *config;
    cucx_worker_t *w = calloc(1, sizeof(*w));
    if (w == NULL) return UCS_ERR_NO_MEMORY;
    w->efd = -1;

    st = ucp_config_read(NULL, NULL, &config);
    if (st != UCS_OK) goto err;
    for (int i = 0; i < n; i++) {
        st = ucp_config_modify(config, names[i], values[i]);
        if (st != UCS_OK) {
            ucp_config_release(config);
            goto err;
        }
    }

    ucp_params_t params = {0};
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED |
                        UCP_PARAM_FIELD_NAME;
    params.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
    params.mt_workers_shared = 0;
    params.name = "ucxnet";
    st = ucp_init(&params, config, &w->ctx);
    ucp_config_release(config);
    if (st != UCS_OK) goto err;

    ucp_worker_params_t wp = {0};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
    st = ucp_worker_create(w->ctx, &wp, &w->worker);
    if (st != UCS_OK) goto err;

    ucp_worker_attr_t attr = {0};
    attr.field_mask = UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER;
    st = ucp_worker_query(w->worker, &attr);
    if (st != UCS_OK) goto err;
    w->max_am_header = attr.max_am_header;

    st = ucp_worker_get_efd(w->worker, &w->efd);
    if (st != UCS_OK) goto err;

    ucp_am_handler_param_t hp = {0};
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                    UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
    hp.id = CUCX_AM_ID;
    hp.cb = am_cb;
    hp.arg = w;
    hp.flags = UCP_AM_FLAG_WHOLE_MSG;
    st = ucp_worker_set_am_recv_handler(w->worker, &hp);
    if (st != UCS_OK) goto err;

    /* REPLY makes UCX tell the receiver which of its endpoints leads back
     * to the sender (reply_ep): ucxnet binds frames to the peer they came
     * from with it. Measured on UCX 1.13.1 (TestReplyFrom, the benchmarks
     * in cucx_test.go): every path (immediate, buffered, zero-copy, the
     * first frame sent before wireup) delivers with reply_ep set; 64 B
     * round trips and one-way frame rates show no cost above run-to-run
     * noise. Until the peer's endpoint id is known (wireup done) UCX
     * refuses immediate completion, so those first sends are copied. */
    w->am_flags = UCP_AM_SEND_FLAG_EAGER | UCP_AM_SEND_FLAG_REPLY;

    *out = w;
    return UCS_OK;
err:
    cucx_close(w);
    return st;
}

void cucx_close(cucx_worker_t *w)
{
    if (w == NULL) return;
    if (w->worker != NULL) {
        w->nev_read = w->nev; /* nothing will read them now */
        w->zc_read = w->zc_done;
        cucx_release_events(w);
        ucp_worker_destroy(w->worker);
    }
    if (w->ctx != NULL) ucp_cleanup(w->ctx);
    for (int c = 0; c < 32; c++) {
        while (w->pool[c] != NULL) {
            cucx_buf_t *b = w->pool[c];
            w->pool[c] = b->next;
            free(b);
        }
    }
    free(w->ev);
    free(w);
}

ucs_status_t cucx_address(cucx_worker_t *w, void **addr, size_t *len)
{
    ucp_address_t *a;
    ucs_status_t st = ucp_worker_get_address(w->worker, &a, len);
    *addr = a;
    return st;
}

void cucx_release_address(cucx_worker_t *w, void *addr)
{
    ucp_worker_release_address(w->worker, addr);
}

/* ---- endpoints ------------------------------------------------------------ */

/* Creates an endpoint to the worker whose packed address is addr (len
 * bytes). Go validates the layout first (ValidateAddress): UCX 1.13 aborts
 * on malformed addresses. As a second guard the address is copied into a
 * buffer with CUCX_ADDR_PAD zeroed bytes after it, so that UCX or a
 * transport reading a fixed-size field past a lying length stays inside
 * memory this function owns. */
ucs_status_t cucx_ep_create(cucx_worker_t *w, const void *addr, size_t len, cucx_ep_t **out)
{
    if (addr == NULL || len == 0 || len > CUCX_ADDR_MAX) {
        return UCS_ERR_INVALID_ADDR;
    }
    cucx_ep_t *ep = calloc(1, sizeof(*ep));
    if (ep == NULL) return UCS_ERR_NO_MEMORY;
    ep->w = w;
    ep->refs = 1;
    uint8_t *copy = calloc(1, len + CUCX_ADDR_PAD);
    if (copy == NULL) {
        free(ep);
        return UCS_ERR_NO_MEMORY;
    }
    memcpy(copy, addr, len);
    ucp_ep_params_t p = {0};
    p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                   UCP_EP_PARAM_FIELD_ERR_HANDLER;
    p.address = (const ucp_address_t*)copy;
    p.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    p.err_handler.cb = ep_err_cb;
    p.err_handler.arg = ep;
    ucs_status_t st = ucp_ep_create(w->worker, &p, &ep->ep);
    free(copy); /* ucp_ep_create does not keep the address */
    if (st != UCS_OK) {
        free(ep);
        return st;
    }
    *out = ep;
    return UCS_OK;
}

static void close_cb(void *request, ucs_status_t status, void *user_data)
{
    cucx_ep_t *ep = user_data;
    (void)status;
    ep->w->inflight--;
    ep_unref(ep);
    ucp_request_free(request);
}

/* Starts closing ep. A flush close lets queued sends finish; force cancels
 * them. The close completes during later progress. */
ucs_status_t cucx_ep_close(cucx_worker_t *w, cucx_ep_t *ep, int force)
{
    ucp_request_param_t p = {0};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_FLAGS |
                     UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.send = close_cb;
    p.user_data = ep;
    p.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    ucs_status_ptr_t r = ucp_ep_close_nbx(ep->ep, &p);
    if (r == NULL || UCS_PTR_IS_ERR(r)) {
        ep_unref(ep); /* closed (or beyond use): Go drops its handle */
        return r == NULL ? UCS_OK : UCS_PTR_STATUS(r);
    }
    w->inflight++;
    return UCS_INPROGRESS;
}

typedef struct {
    cucx_worker_t *w;
    uint64_t       token;
} flush_arg_t;

static void flush_cb(void *request, ucs_status_t status, void *user_data)
{
    flush_arg_t *a = user_data;
    cucx_worker_t *w = a->w;
    cucx_event_t *e = ev_push(w);
    w->inflight--;
    if (e != NULL) {
        e->kind = CUCX_EV_FLUSHED;
        e->token = a->token;
        e->status = status;
    }
    free(a);
    ucp_request_free(request);
}

/* Starts flushing ep: every send issued on it so far completes (is handed
 * to the transport) before the flush does. UCS_INPROGRESS means a
 * CUCX_EV_FLUSHED event with token will follow; UCS_OK means done now. */
ucs_status_t cucx_ep_flush(cucx_worker_t *w, cucx_ep_t *ep, uint64_t token)
{
    flush_arg_t *a = malloc(sizeof(*a));
    if (a == NULL) return UCS_ERR_NO_MEMORY;
    a->w = w;
    a->token = token;
    ucp_request_param_t p = {0};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.send = flush_cb;
    p.user_data = a;
    ucs_status_ptr_t r = ucp_ep_flush_nbx(ep->ep, &p);
    if (r == NULL) {
        free(a);
        return UCS_OK;
    }
    if (UCS_PTR_IS_ERR(r)) {
        free(a);
        return UCS_PTR_STATUS(r);
    }
    w->inflight++;
    return UCS_INPROGRESS;
}

static void worker_flush_cb(void *request, ucs_status_t status, void *user_data)
{
    cucx_worker_t *w = user_data;
    w->flushing = 0;
    ucp_request_free(request);
}

/* Starts flushing the whole worker: every endpoint's sends and UCX's own
 * messages, a wireup reply still waiting for its connection among them.
 * UCS_INPROGRESS means w->flushing stays set until it is done; it is not
 * counted in w->inflight, which counts the sends UCX owns. */
ucs_status_t cucx_worker_flush(cucx_worker_t *w)
{
    ucp_request_param_t p = {0};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.send = worker_flush_cb;
    p.user_data = w;
    ucs_status_ptr_t r = ucp_worker_flush_nbx(w->worker, &p);
    if (r == NULL) return UCS_OK;
    if (UCS_PTR_IS_ERR(r)) return UCS_PTR_STATUS(r);
    w->flushing = 1;
    return UCS_INPROGRESS;
}

/* Returns ucp_ep_print_info's text (malloc'ed; the caller frees it). */
char *cucx_ep_info(cucx_ep_t *ep)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (f == NULL) return NULL;
    ucp_ep_print_info(ep->ep, f);
    fclose(f);
    return buf;
}

/* ---- sends ------------------------------------------------------------------ */

static void send_cb(void *request, ucs_status_t status, void *user_data)
{
    cucx_buf_t *b = user_data;
    cucx_worker_t *w = b->w;
    w->inflight--;
    w->inflight_bytes -= b->bytes;
    w->buffered_done++;
    b->ep->inflight_bytes -= b->bytes;
    ep_unref(b->ep);
    b->ep = NULL;
    if (status != UCS_OK) w->send_errors++;
    buf_put(b);
    ucp_request_free(request);
}

/* Starts one eager AM send whose completion calls cb with user_data. */
static ucs_status_ptr_t eager_send(cucx_worker_t *w, cucx_ep_t *ep, const void *hdr, size_t hdr_len,
                                   const void *data, size_t len, ucp_send_nbx_callback_t cb,
                                   void *user_data)
{
    ucp_request_param_t p;
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                     UCP_OP_ATTR_FIELD_FLAGS;
    p.cb.send = cb;
    p.user_data = user_data;
    p.flags = w->am_flags;
    return ucp_am_send_nbx(ep->ep, CUCX_AM_ID, hdr, hdr_len, len ? data : NULL, len, &p);
}

static ucs_status_t send_buf(cucx_worker_t *w, cucx_ep_t *ep, cucx_buf_t *b, size_t hdr_len,
                             size_t len)
{
    ucs_status_ptr_t r = eager_send(w, ep, b->data, hdr_len, b->data + hdr_len, len, send_cb, b);
    if (r == NULL) {
        buf_put(b);
        return UCS_OK;
    }
    if (UCS_PTR_IS_ERR(r)) {
        buf_put(b);
        return UCS_PTR_STATUS(r);
    }
    b->bytes = len;
    b->ep = ep;
    ep->refs++;
    ep->inflight_bytes += len;
    w->inflight++;
    w->inflight_bytes += len;
    return UCS_INPROGRESS;
}

/* Sends one frame. hdr and data are copied before the call returns, so the
 * caller may reuse them at once. Returns UCS_OK or UCS_INPROGRESS on
 * success (the latter: UCX still owns the copy and needs progress). */
ucs_status_t cucx_send(cucx_worker_t *w, cucx_ep_t *ep, const void *hdr, size_t hdr_len,
                       const void *data, size_t len)
{
    /* For small frames, first ask UCX to send straight from the caller's
     * memory, but only if it can finish before returning (UCX 1.13 does so
     * for its "short" protocol, e.g. shared memory up to a few hundred
     * bytes): then nothing is copied here and nothing outlives the call.
     * Larger frames were always refused in measurements (bcopy/zcopy may
     * need to wait), so they skip the attempt and are copied into a buffer
     * the operation owns. */
    if (len <= CUCX_IMM_MAX) {
        ucp_request_param_t ip;
        ip.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL;
        ip.flags = w->am_flags;
        ucs_status_ptr_t r = ucp_am_send_nbx(ep->ep, CUCX_AM_ID, hdr, hdr_len, len ? data : NULL,
                                             len, &ip);
        if (r == NULL) {
            w->imm_sends++;
            return UCS_OK;
        }
        if (UCS_PTR_IS_ERR(r) && UCS_PTR_STATUS(r) != UCS_ERR_NO_RESOURCE) {
            return UCS_PTR_STATUS(r);
        }
        /* UCS_ERR_NO_RESOURCE: not possible at once. FORCE_IMM_CMPL never
         * returns a request. */
    }

    cucx_buf_t *b = buf_get(w, hdr_len + len);
    if (b == NULL) return UCS_ERR_NO_MEMORY;
    if (hdr_len) memcpy(b->data, hdr, hdr_len);
    if (len) memcpy(b->data + hdr_len, data, len);
    return send_buf(w, ep, b, hdr_len, len);
}

static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

/* Sends data as consecutive frames of at most frame bytes in one call: the
 * template header hdr gets sequence number seq, seq+1, ... at seq_off
 * (8 bytes LE) and each frame's length at len_off (4 bytes LE). *sent is the
 * number of data bytes handed to UCX, also on error. Returns UCS_INPROGRESS
 * when any frame is still owned by UCX. */
ucs_status_t cucx_send_frames(cucx_worker_t *w, cucx_ep_t *ep, uint8_t *hdr, size_t hdr_len,
                              size_t seq_off, size_t len_off, uint64_t seq,
                              const uint8_t *data, size_t len, size_t frame, size_t *sent)
{
    ucs_status_t ret = UCS_OK;
    size_t off = 0;
    while (off < len) {
        size_t n = len - off < frame ? len - off : frame;
        put_le(hdr + seq_off, seq++, 8);
        put_le(hdr + len_off, n, 4);
        ucs_status_t st = cucx_send(w, ep, hdr, hdr_len, data + off, n);
        if (st == UCS_INPROGRESS) {
            ret = UCS_INPROGRESS;
        } else if (st != UCS_OK) {
            *sent = off;
            return st;
        }
        off += n;
    }
    *sent = off;
    return ret;
}

/* ---- zero-copy sends ------------------------------------------------------
 * The payload is sent straight from the caller's memory, which the caller
 * keeps pinned and untouched until the op is reported finished. Only the
 * headers are copied (into the op), since UCX 1.13 keeps the header
 * pointer until a send completes. A finished op goes on a list, not into
 * the event array: reporting it needs no allocation, so it cannot be lost
 * (a Write waits for it). */

static void zc_finish(cucx_zc_op_t *op)
{
    cucx_worker_t *w = op->w;
    op->next = w->zc_done;
    w->zc_done = op;
}

static void zc_send_cb(void *request, ucs_status_t status, void *user_data)
{
    cucx_zc_op_t *op = user_data;
    cucx_worker_t *w = op->w;
    w->inflight--;
    if (status != UCS_OK) {
        w->send_errors++;
        if (op->status == UCS_OK) op->status = status;
    }
    ucp_request_free(request);
    if (--op->pending == 0) zc_finish(op);
}

/* Sends data as consecutive frames like cucx_send_frames, but from the
 * caller's memory. *wait = 1 means UCX still reads from data: the caller
 * must keep it valid until a CUCX_EV_SENT with token is reported (also when
 * an error is returned, for the frames sent before it). *wait = 0 means UCX
 * is done with data. */
ucs_status_t cucx_send_frames_zc(cucx_worker_t *w, cucx_ep_t *ep, const uint8_t *hdr,
                                 size_t hdr_len, size_t seq_off, size_t len_off, uint64_t seq,
                                 const uint8_t *data, size_t len, size_t frame, uint64_t token,
                                 size_t *sent, int *wait)
{
    size_t nframes = frame ? (len + frame - 1) / frame : 0;
    *sent = 0;
    *wait = 0;
    if (nframes == 0) return UCS_OK;
    cucx_zc_op_t *op = malloc(sizeof(*op) + nframes * hdr_len);
    if (op == NULL) return UCS_ERR_NO_MEMORY;
    op->w = w;
    op->next = NULL;
    op->token = token;
    op->pending = 1; /* the submitter's reference */
    op->status = UCS_OK;

    ucs_status_t ret = UCS_OK;
    size_t off = 0;
    for (size_t i = 0; off < len; i++) {
        size_t n = len - off < frame ? len - off : frame;
        uint8_t *h = op->hdrs + i * hdr_len;
        memcpy(h, hdr, hdr_len);
        put_le(h + seq_off, seq + i, 8);
        put_le(h + len_off, n, 4);
        ucs_status_ptr_t r = eager_send(w, ep, h, hdr_len, data + off, n, zc_send_cb, op);
        if (UCS_PTR_IS_ERR(r)) {
            ret = UCS_PTR_STATUS(r);
            break;
        }
        if (r != NULL) {
            op->pending++;
            w->inflight++;
        }
        w->zc_frames++;
        off += n;
    }
    *sent = off;
    if (--op->pending == 0) {
        free(op);
    } else {
        *wait = 1;
    }
    return ret;
}

/* ---- progress ---------------------------------------------------------------- */

/* Releases the previous batch and the kept data in rel, then progresses the worker until it has no
 * more work or max_events events are waiting. Returns the progress count. */
unsigned cucx_progress(cucx_worker_t *w, size_t max_events, const cucx_data_t *rel,
                       size_t nrel)
{
    unsigned total = 0, n;
    cucx_release_events(w);
    cucx_release_data(w, rel, nrel);
    do {
        n = ucp_worker_progress(w->worker);
        total += n;
    } while (n != 0 && w->nev < max_events);
    return total;
}

/* Releases the previous batch and arms the worker's event fd. UCS_ERR_BUSY
 * means there is work to do: progress again before sleeping. */
ucs_status_t cucx_arm(cucx_worker_t *w)
{
    cucx_release_events(w);
    if (w->nev > 0 || w->zc_done != NULL) {
        return UCS_ERR_BUSY; /* recorded outside progress, not read yet */
    }
    return ucp_worker_arm(w->worker);
}
