// Typed wrappers over libcurl's C-variadic calls, which Swift cannot call directly.
#ifndef TOKENPROXY_CCURL_SHIM_H
#define TOKENPROXY_CCURL_SHIM_H
#include <curl/curl.h>

static inline CURLcode tp_easy_setopt_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode tp_easy_setopt_off(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode tp_easy_setopt_ptr(CURL *h, CURLoption o, const void *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode tp_easy_setopt_str(CURL *h, CURLoption o, const char *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode tp_easy_setopt_slist(CURL *h, CURLoption o, struct curl_slist *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode tp_easy_setopt_write_cb(CURL *h, CURLoption o, size_t (*f)(char *, size_t, size_t, void *)) { return curl_easy_setopt(h, o, f); }
static inline CURLcode tp_easy_setopt_xfer_cb(CURL *h, CURLoption o, int (*f)(void *, curl_off_t, curl_off_t, curl_off_t, curl_off_t)) { return curl_easy_setopt(h, o, f); }
static inline CURLcode tp_easy_setopt_sockopt_cb(CURL *h, CURLoption o, int (*f)(void *, curl_socket_t, curlsocktype)) { return curl_easy_setopt(h, o, f); }

static inline CURLcode tp_easy_getinfo_long(CURL *h, CURLINFO i, long *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode tp_easy_getinfo_ptr(CURL *h, CURLINFO i, void **v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode tp_easy_getinfo_off(CURL *h, CURLINFO i, curl_off_t *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode tp_easy_getinfo_socket(CURL *h, CURLINFO i, curl_socket_t *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode tp_easy_getinfo_str(CURL *h, CURLINFO i, char **v) { return curl_easy_getinfo(h, i, v); }

// A share handle that keeps one easy handle's connections in a cache of their own.
static inline CURLSHcode tp_share_connections(CURLSH *s) { return curl_share_setopt(s, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT); }

static inline CURLMcode tp_multi_setopt_long(CURLM *m, CURLMoption o, long v) { return curl_multi_setopt(m, o, v); }
static inline CURLMcode tp_multi_setopt_ptr(CURLM *m, CURLMoption o, void *v) { return curl_multi_setopt(m, o, v); }
static inline CURLMcode tp_multi_setopt_socket_cb(CURLM *m, int (*f)(CURL *, curl_socket_t, int, void *, void *)) {
    return curl_multi_setopt(m, CURLMOPT_SOCKETFUNCTION, f);
}
static inline CURLMcode tp_multi_setopt_timer_cb(CURLM *m, int (*f)(CURLM *, long, void *)) {
    return curl_multi_setopt(m, CURLMOPT_TIMERFUNCTION, f);
}

// CURL_WRITEFUNC_PAUSE and CURL_READFUNC_PAUSE are macros Swift cannot import.
static inline size_t tp_writefunc_pause(void) { return CURL_WRITEFUNC_PAUSE; }
static inline size_t tp_readfunc_pause(void) { return CURL_READFUNC_PAUSE; }
static inline size_t tp_readfunc_abort(void) { return CURL_READFUNC_ABORT; }
static inline curl_socket_t tp_socket_timeout(void) { return CURL_SOCKET_TIMEOUT; }

// The easy handle of a finished transfer, from a CURLMsg (the `data` union is awkward in Swift).
static inline CURLcode tp_msg_result(CURLMsg *m) { return m->data.result; }
#endif
