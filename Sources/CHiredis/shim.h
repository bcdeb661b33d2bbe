// Typed wrappers over hiredis (Debian 12: libhiredis-dev 0.14), so that Swift never sees its
// macros, its `void *` replies or the fields of its structs. Only Credentials/Store/RedisConnection.swift
// imports this module, with `internal import`.
#ifndef TOKENPROXY_CHIREDIS_SHIM_H
#define TOKENPROXY_CHIREDIS_SHIM_H
#include <hiredis/hiredis.h>
#include <sys/time.h>

static inline struct timeval tp_redis_timeval(long milliseconds) {
    struct timeval tv;
    tv.tv_sec = milliseconds / 1000;
    tv.tv_usec = (milliseconds % 1000) * 1000;
    return tv;
}

/// NULL only when hiredis could not allocate the context; otherwise check tp_redis_failed.
static inline redisContext *tp_redis_connect(const char *host, int port, long timeout_ms) {
    return redisConnectWithTimeout(host, port, tp_redis_timeval(timeout_ms));
}
static inline int tp_redis_set_timeout(redisContext *c, long timeout_ms) {
    return redisSetTimeout(c, tp_redis_timeval(timeout_ms)) == REDIS_OK ? 0 : -1;
}
static inline int tp_redis_failed(const redisContext *c) { return c->err != 0; }
static inline const char *tp_redis_error_text(const redisContext *c) { return c->errstr; }
static inline int tp_redis_fd(const redisContext *c) { return c->fd; }
static inline void tp_redis_free(redisContext *c) { redisFree(c); }

/// One command, its reply (NULL on an I/O or protocol error: the context is then unusable).
static inline redisReply *tp_redis_command(redisContext *c, int argc, const char *const *argv, const size_t *lengths) {
    return (redisReply *)redisCommandArgv(c, argc, (const char **)argv, lengths);
}
/// Reads what the socket has (it blocks up to the context's timeout when nothing is there).
static inline int tp_redis_buffer_read(redisContext *c) { return redisBufferRead(c) == REDIS_OK ? 0 : -1; }
/// A reply already read into the buffer, without touching the socket: 1 and *reply set, 0 none, -1 error.
static inline int tp_redis_buffered_reply(redisContext *c, redisReply **reply) {
    void *r = NULL;
    if (redisGetReplyFromReader(c, &r) != REDIS_OK) return -1;
    *reply = (redisReply *)r;
    return r != NULL ? 1 : 0;
}

enum tp_redis_kind { tp_redis_string = 1, tp_redis_array, tp_redis_integer, tp_redis_nil, tp_redis_status, tp_redis_error };
static inline int tp_redis_reply_kind(const redisReply *r) { return r->type; }
static inline long long tp_redis_reply_integer(const redisReply *r) { return r->integer; }
static inline const char *tp_redis_reply_bytes(const redisReply *r) { return r->str; }
static inline size_t tp_redis_reply_length(const redisReply *r) { return r->len; }
static inline size_t tp_redis_reply_count(const redisReply *r) { return r->elements; }
static inline const redisReply *tp_redis_reply_element(const redisReply *r, size_t i) { return r->element[i]; }
static inline void tp_redis_reply_free(redisReply *r) { freeReplyObject(r); }

/// A RESP parser without a socket: `rediss://` reads its bytes through libcurl's TLS session.
static inline redisReader *tp_redis_reader_create(void) { return redisReaderCreate(); }
static inline void tp_redis_reader_free(redisReader *r) { redisReaderFree(r); }
static inline int tp_redis_reader_feed(redisReader *r, const char *bytes, size_t length) {
    return redisReaderFeed(r, bytes, length) == REDIS_OK ? 0 : -1;
}
/// 1 and *reply set, 0 when no whole reply is buffered yet, -1 on a protocol error.
static inline int tp_redis_reader_reply(redisReader *r, redisReply **reply) {
    void *got = NULL;
    if (redisReaderGetReply(r, &got) != REDIS_OK) return -1;
    *reply = (redisReply *)got;
    return got != NULL ? 1 : 0;
}
#endif
