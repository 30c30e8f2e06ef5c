/* glue.h: the C half of package cucx. Everything UCX calls back into lives
 * here, in C, so that no UCX callback ever crosses into Go: received frames,
 * send completions and endpoint errors are recorded in a C-owned event array
 * that Go drains once per progress batch. */
#ifndef UCXNET_CUCX_GLUE_H
#define UCXNET_CUCX_GLUE_H

#include <stddef.h>
#include <stdint.h>
#include <ucp/api/ucp.h>

#define CUCX_AM_ID 0x75 /* the one active-message id ucxnet uses */
#define CUCX_HDR_MAX 64 /* header bytes an event keeps */
#define CUCX_IMM_MAX 1024 /* largest payload offered for immediate completion */
#define CUCX_ADDR_MAX 8192 /* longest packed worker address accepted (Go: MaxAddressLen) */
#define CUCX_ADDR_PAD 1024 /* zeroed bytes after a copied address (see cucx_ep_create) */

enum {
    CUCX_EV_FRAME = 1,    /* an active message: hdr + data */
    CUCX_EV_EP_ERROR = 2, /* an endpoint failed: ep, status */
    CUCX_EV_BAD = 3,      /* an active message we cannot take (bad header size, rendezvous) */
    CUCX_EV_FLUSHED = 4,  /* an endpoint flush finished: token, status */
    CUCX_EV_SENT = 5      /* a zero-copy send finished: token, status */
};

enum {
    CUCX_DATA_NONE = 0,
    CUCX_DATA_DESC = 1,  /* data is a UCX descriptor: ucp_am_data_release */
    CUCX_DATA_BUF = 2    /* data was copied to a pooled buffer: back to the pool */
};

typedef struct cucx_ep cucx_ep_t;

typedef struct {
    uint32_t kind;
    uint32_t data_kind;
    int32_t  status;
    uint32_t hdr_len;
    uint8_t  hdr[CUCX_HDR_MAX];
    void    *data;
    size_t   len;
    cucx_ep_t *ep; /* CUCX_EV_EP_ERROR */
    uint64_t token;
    uintptr_t from; /* CUCX_EV_FRAME: UCX's reply_ep for the sender, or 0 */
} cucx_event_t;

/* Received data kept past its progress batch (CUCX_DATA_DESC or _BUF),
 * handed back for release later. */
typedef struct {
    uintptr_t ptr;
    uint32_t  kind;
} cucx_data_t;

typedef struct cucx_buf cucx_buf_t;
typedef struct cucx_zc_op cucx_zc_op_t;

typedef struct {
    ucp_context_h ctx;
    ucp_worker_h  worker;
    int           efd;
    size_t        max_am_header;

    cucx_event_t *ev;
    size_t        nev;
    size_t        cap;
    size_t        nev_read; /* events Go has read: the next release frees these only */

    cucx_buf_t   *pool[32]; /* free lists by size class */
    uint32_t      pooled[32];
    uint64_t      pooled_bytes; /* bytes of the buffers in pool */
    uint64_t      pool_gets;    /* buffers taken (from the pool or malloc) */

    uint32_t      am_flags;    /* flags of every AM send: EAGER | REPLY */
    uint64_t      inflight;    /* sends UCX still owns */
    int           flushing;    /* a worker flush (cucx_worker_flush) not done */
    uint64_t      inflight_bytes; /* payload bytes in C-owned buffers UCX still owns */
    uint64_t      send_errors; /* sends that completed with an error */
    uint64_t      buffered_done; /* buffered sends (send_buf) UCX completed later */
    uint64_t      bufs_alloc;  /* buffers obtained from malloc */
    uint64_t      imm_sends;   /* sends UCX completed from the caller's memory */
    uint64_t      zc_frames;   /* frames sent from the caller's (pinned) memory */

    cucx_zc_op_t *zc_done;     /* finished zero-copy sends, newest first (a list) */
    cucx_zc_op_t *zc_read;     /* the part of zc_done Go has read (a suffix of it) */
} cucx_worker_t;

/* A zero-copy send (cucx_send_frames_zc) that UCX finished: reported with
 * the batch it finished in, then freed with it. */
struct cucx_zc_op {
    cucx_worker_t *w;
    cucx_zc_op_t  *next;
    uint64_t       token;
    uint32_t       pending; /* frames UCX still owns, +1 while submitting */
    int32_t        status;  /* the first error, or UCS_OK */
    uint8_t        hdrs[];  /* one header per frame: UCX 1.13 keeps the header pointer */
};

void cucx_quiet(void);
ucs_status_t cucx_open(cucx_worker_t **out, const char **names, const char **values, int n);
void         cucx_close(cucx_worker_t *w);
/* cucx_trim_pool frees the pooled buffers beyond what each class keeps for
 * good (the engine calls it once the pool has been idle a while). */
void         cucx_trim_pool(cucx_worker_t *w);
ucs_status_t cucx_address(cucx_worker_t *w, void **addr, size_t *len);
void         cucx_release_address(cucx_worker_t *w, void *addr);
/* An endpoint as Go holds it: UCX's handle, and the payload bytes of sends
 * on it that UCX could not finish at once, so that a writer can tell a
 * backed-up peer from a backed-up worker. Freed once the endpoint is closed
 * and no send references it. */
struct cucx_ep {
    ucp_ep_h       ep;
    cucx_worker_t *w;
    uint64_t       inflight_bytes; /* written under the worker lock; Go reads it atomically */
    uint32_t       refs;           /* the endpoint itself (until closed) + sends in flight */
};

ucs_status_t cucx_ep_create(cucx_worker_t *w, const void *addr, size_t len, cucx_ep_t **ep);
ucs_status_t cucx_ep_flush(cucx_worker_t *w, cucx_ep_t *ep, uint64_t token);
ucs_status_t cucx_worker_flush(cucx_worker_t *w);
ucs_status_t cucx_ep_close(cucx_worker_t *w, cucx_ep_t *ep, int force);
char        *cucx_ep_info(cucx_ep_t *ep);
ucs_status_t cucx_send(cucx_worker_t *w, cucx_ep_t *ep, const void *hdr, size_t hdr_len,
                       const void *data, size_t len);
ucs_status_t cucx_send_frames(cucx_worker_t *w, cucx_ep_t *ep, uint8_t *hdr, size_t hdr_len,
                              size_t seq_off, size_t len_off, uint64_t seq,
                              const uint8_t *data, size_t len, size_t frame, size_t *sent);
ucs_status_t cucx_send_frames_zc(cucx_worker_t *w, cucx_ep_t *ep, const uint8_t *hdr,
                                 size_t hdr_len, size_t seq_off, size_t len_off, uint64_t seq,
                                 const uint8_t *data, size_t len, size_t frame, uint64_t token,
                                 size_t *sent, int *wait);
unsigned     cucx_progress(cucx_worker_t *w, size_t max_events, const cucx_data_t *rel,
                           size_t nrel);
void         cucx_release_data(cucx_worker_t *w, const cucx_data_t *rel, size_t nrel);
ucs_status_t cucx_arm(cucx_worker_t *w);
void         cucx_release_events(cucx_worker_t *w);

#endif
