// A load generator for HTTPS through a forward proxy, which wrk cannot do (it has no proxy
// support): per connection, optionally `CONNECT host:port` to the proxy and read its 200, then a
// TLS handshake with SNI = host, verifying the certificate against a CA file and the name
// (RFC 6125), then `GET PATH` over HTTP/1.1 in a loop. The same program run straight at a TLS
// listener (no CONNECT) is the comparison, so both sides pay the same client costs.
//
//   tunnel_load -a CA -c CONNS -d SECONDS [-w WARMUP] [-C HOST:PORT] [-s NAME] [-n [-r]] [-p PATH] ADDR:PORT
//     -C HOST:PORT   send `CONNECT HOST:PORT` to ADDR:PORT first (a forward proxy); SNI and the
//                    verified name are HOST
//     -s NAME        SNI, verified name and Host field without -C (default localhost)
//     -n             a new connection for every request (`Connection: close`): TCP connect, CONNECT,
//                    TLS handshake and request each time; otherwise keep-alive
//     -r             with -n: resume the session of the connection before (RFC 8446 §2.2: a PSK
//                    from the server's ticket, with a new (EC)DHE share; no certificate is sent or
//                    verified), as wrk does; without -r every handshake is a full one
//
// One thread per connection with blocking sockets (5 s timeouts). Latency is from the request's
// first byte to the response's last in keep-alive mode, and from connect() to the response's last
// byte with -n (so it includes the handshake; wrk's latency starts after it). The last line is for
// scripts:
//   RESULT rps=… p50_us=… p90_us=… p99_us=… max_us=… requests=… errors=… non200=… handshakes=… resumed=…
// Built by bench/tls-cells.sh: gcc -O2 -o tunnel_load tunnel_load.c -lssl -lcrypto -lpthread
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

// Latency histogram over nanoseconds: exact below 2^SUB_BITS, then 2^SUB_BITS buckets per power
// of two (about 3 % wide), which is enough for percentiles and needs no allocation.
enum { SUB_BITS = 5, SUBS = 1 << SUB_BITS, BUCKETS = 64 * SUBS };

static int bucket_of(uint64_t ns) {
    if (ns < SUBS) return (int)ns;
    int shift = (63 - __builtin_clzll(ns)) - SUB_BITS;
    return (shift + 1) * SUBS + (int)((ns >> shift) & (SUBS - 1));
}

static uint64_t bucket_middle(int index) {
    if (index < SUBS) return (uint64_t)index;
    int shift = index / SUBS - 1;
    uint64_t low = (uint64_t)(SUBS + index % SUBS) << shift;
    return low + ((1ull << shift) >> 1);
}

static struct {
    struct sockaddr_in address;
    const char *connect_target;  // "host:port" or NULL
    char name[256];              // SNI, verified name, Host field
    const char *ca_file;
    const char *path;
    int connections;
    double seconds, warmup;
    int new_connection, resume;
} options = {.path = "/small", .connections = 1, .seconds = 10, .warmup = 0};

static SSL_CTX *context;
enum { WARMING, MEASURING, STOPPING };
static atomic_int phase = WARMING;

struct worker {
    pthread_t thread;
    uint64_t histogram[BUCKETS];
    uint64_t requests, errors, non200, handshakes, resumed;
    SSL_SESSION *session;  // with -r: the one to resume next
    char first_error[160];
};

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void fail(struct worker *w, const char *what) {
    if (atomic_load(&phase) == MEASURING) w->errors++;
    if (w->first_error[0] == 0) {
        unsigned long e = ERR_peek_error();
        char detail[96] = "";
        if (e) ERR_error_string_n(e, detail, sizeof detail);
        snprintf(w->first_error, sizeof w->first_error, "%s%s%s%s%s%s", what, errno ? ": " : "", errno ? strerror(errno) : "",
                 detail[0] ? " (" : "", detail, detail[0] ? ")" : "");
    }
    ERR_clear_error();
}

// Reads from a plain socket until the end of a response head; true for a 2xx status.
static int read_connect_answer(int fd) {
    char head[4096];
    size_t have = 0;
    while (have < sizeof head - 1) {
        ssize_t n = read(fd, head + have, sizeof head - 1 - have);
        if (n <= 0) return 0;
        have += (size_t)n;
        head[have] = 0;
        if (strstr(head, "\r\n\r\n")) return strncmp(head, "HTTP/1.", 7) == 0 && head[9] == '2';
    }
    return 0;
}

static int write_all_plain(int fd, const char *bytes, size_t count) {
    while (count > 0) {
        ssize_t n = write(fd, bytes, count);
        if (n <= 0) return 0;
        bytes += n;
        count -= (size_t)n;
    }
    return 1;
}

// A connected, handshaken TLS session, or NULL (the error counted).
static SSL *open_session(struct worker *w, int *fd_out) {
    errno = 0;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return fail(w, "socket"), NULL;
    struct timeval timeout = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&options.address, sizeof options.address) != 0) {
        fail(w, "connect");
        close(fd);
        return NULL;
    }
    if (options.connect_target) {
        char request[600];
        int length = snprintf(request, sizeof request, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", options.connect_target,
                              options.connect_target);
        if (!write_all_plain(fd, request, (size_t)length) || !read_connect_answer(fd)) {
            fail(w, "CONNECT not answered 2xx");
            close(fd);
            return NULL;
        }
    }
    SSL *ssl = SSL_new(context);
    if (!ssl || !SSL_set_fd(ssl, fd) || !SSL_set_tlsext_host_name(ssl, options.name) || !SSL_set1_host(ssl, options.name)) {
        fail(w, "SSL_new");
        SSL_free(ssl);
        close(fd);
        return NULL;
    }
    if (w->session) SSL_set_session(ssl, w->session);
    if (SSL_connect(ssl) != 1) {
        fail(w, "TLS handshake");
        SSL_free(ssl);
        close(fd);
        return NULL;
    }
    w->handshakes++;
    if (SSL_session_reused(ssl)) w->resumed++;
    *fd_out = fd;
    return ssl;
}

static int write_all(SSL *ssl, const char *bytes, size_t count) {
    while (count > 0) {
        size_t n = 0;
        if (SSL_write_ex(ssl, bytes, count, &n) != 1) return 0;
        bytes += n;
        count -= n;
    }
    return 1;
}

// The value of a header field in a head (case-insensitive name), or NULL.
static const char *field(const char *head, const char *name) {
    size_t length = strlen(name);
    for (const char *line = strstr(head, "\r\n"); line && line[2] != '\r'; line = strstr(line + 2, "\r\n")) {
        if (strncasecmp(line + 2, name, length) == 0 && line[2 + length] == ':') {
            const char *value = line + 3 + length;
            while (*value == ' ') value++;
            return value;
        }
    }
    return NULL;
}

// Reads one response with Content-Length framing. 1: complete (status in *status, whether the
// server closes in *closes); 0: failed.
static int read_response(SSL *ssl, int *status, int *closes) {
    char buffer[16384];
    size_t have = 0, head_length = 0;
    while (head_length == 0) {
        if (have == sizeof buffer - 1) return 0;
        size_t n = 0;
        if (SSL_read_ex(ssl, buffer + have, sizeof buffer - 1 - have, &n) != 1) return 0;
        have += n;
        buffer[have] = 0;
        char *end = strstr(buffer, "\r\n\r\n");
        if (end) head_length = (size_t)(end - buffer) + 4;
    }
    if (strncmp(buffer, "HTTP/1.", 7) != 0) return 0;
    *status = atoi(buffer + 9);
    buffer[head_length - 2] = 0;  // the head alone, for field()
    const char *length_field = field(buffer, "content-length");
    if (!length_field) return 0;  // the servers measured here always send one
    const char *connection = field(buffer, "connection");
    *closes = connection && strncasecmp(connection, "close", 5) == 0;
    size_t body = strtoull(length_field, NULL, 10), got = have - head_length;
    while (got < body) {
        size_t n = 0;
        if (SSL_read_ex(ssl, buffer, sizeof buffer, &n) != 1) return 0;
        got += n;
    }
    return got == body;
}

static void *run(void *argument) {
    struct worker *w = argument;
    char request[1024];
    int request_length = snprintf(request, sizeof request, "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: tunnel_load\r\n%s\r\n", options.path,
                                  options.name, options.new_connection ? "Connection: close\r\n" : "");
    SSL *ssl = NULL;
    int fd = -1;
    while (atomic_load(&phase) != STOPPING) {
        uint64_t start = now_ns();
        if (!ssl && !(ssl = open_session(w, &fd))) {
            usleep(1000);  // a refusing server is not hammered in a tight loop
            continue;
        }
        if (!options.new_connection) start = now_ns();
        int status = 0, closes = 0;
        errno = 0;
        int ok = write_all(ssl, request, (size_t)request_length) && read_response(ssl, &status, &closes);
        uint64_t end = now_ns();
        if (!ok) {
            fail(w, "request");
        } else if (atomic_load(&phase) == MEASURING) {
            w->requests++;
            if (status != 200) w->non200++;
            w->histogram[bucket_of(end - start)]++;
        }
        if (!ok || closes || options.new_connection) {
            if (ok && options.resume) {
                // The newest session: TLS 1.3 tickets arrive after the handshake, read with the response.
                SSL_SESSION *latest = SSL_get1_session(ssl);
                if (latest && SSL_SESSION_is_resumable(latest)) {
                    SSL_SESSION_free(w->session);
                    w->session = latest;
                } else {
                    SSL_SESSION_free(latest);
                }
            }
            if (ok) SSL_shutdown(ssl);  // close_notify; the server may already be gone (SIGPIPE ignored)
            SSL_free(ssl);
            close(fd);
            ssl = NULL;
        }
    }
    if (ssl) {
        SSL_free(ssl);
        close(fd);
    }
    SSL_SESSION_free(w->session);
    return NULL;
}

static void usage(void) {
    fprintf(stderr, "usage: tunnel_load -a CA -c CONNS -d SECONDS [-w WARMUP] [-C HOST:PORT] [-s NAME] [-n [-r]] [-p PATH] ADDR:PORT\n");
    exit(2);
}

static void sleep_seconds(double seconds) {
    struct timespec t = {.tv_sec = (time_t)seconds, .tv_nsec = (long)((seconds - (time_t)seconds) * 1e9)};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {}
}

int main(int argc, char **argv) {
    const char *name = "localhost";
    int opt;
    while ((opt = getopt(argc, argv, "a:c:d:w:C:s:nrp:")) != -1) {
        switch (opt) {
        case 'a': options.ca_file = optarg; break;
        case 'c': options.connections = atoi(optarg); break;
        case 'd': options.seconds = atof(optarg); break;
        case 'w': options.warmup = atof(optarg); break;
        case 'C': options.connect_target = optarg; break;
        case 's': name = optarg; break;
        case 'n': options.new_connection = 1; break;
        case 'r': options.resume = 1; break;
        case 'p': options.path = optarg; break;
        default: usage();
        }
    }
    if (optind != argc - 1 || !options.ca_file || (options.resume && !options.new_connection) || options.connections < 1 || options.seconds <= 0) usage();
    char *colon = strrchr(argv[optind], ':');
    if (!colon) usage();
    *colon = 0;
    options.address.sin_family = AF_INET;
    options.address.sin_port = htons((uint16_t)atoi(colon + 1));
    if (inet_pton(AF_INET, argv[optind], &options.address.sin_addr) != 1) usage();
    if (options.connect_target) {
        const char *port = strrchr(options.connect_target, ':');
        if (!port) usage();
        snprintf(options.name, sizeof options.name, "%.*s", (int)(port - options.connect_target), options.connect_target);
    } else {
        snprintf(options.name, sizeof options.name, "%s", name);
    }
    signal(SIGPIPE, SIG_IGN);

    context = SSL_CTX_new(TLS_client_method());
    if (!context || SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION) != 1 ||
        SSL_CTX_load_verify_locations(context, options.ca_file, NULL) != 1) {
        fprintf(stderr, "tunnel_load: cannot set up TLS with the CA file %s\n", options.ca_file);
        return 2;
    }
    SSL_CTX_set_verify(context, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_session_cache_mode(context, SSL_SESS_CACHE_OFF);  // full handshakes only, as wrk

    struct worker *workers = calloc((size_t)options.connections, sizeof *workers);
    if (!workers) return 2;
    for (int i = 0; i < options.connections; i++) {
        if (pthread_create(&workers[i].thread, NULL, run, &workers[i]) != 0) {
            fprintf(stderr, "tunnel_load: pthread_create failed\n");
            return 2;
        }
    }
    sleep_seconds(options.warmup);
    uint64_t start = now_ns();
    atomic_store(&phase, MEASURING);
    sleep_seconds(options.seconds);
    atomic_store(&phase, STOPPING);
    uint64_t end = now_ns();
    for (int i = 0; i < options.connections; i++) pthread_join(workers[i].thread, NULL);

    static uint64_t histogram[BUCKETS];
    uint64_t requests = 0, errors = 0, non200 = 0, handshakes = 0, resumed = 0;
    const char *first_error = NULL;
    for (int i = 0; i < options.connections; i++) {
        for (int b = 0; b < BUCKETS; b++) histogram[b] += workers[i].histogram[b];
        requests += workers[i].requests;
        errors += workers[i].errors;
        non200 += workers[i].non200;
        handshakes += workers[i].handshakes;
        resumed += workers[i].resumed;
        if (!first_error && workers[i].first_error[0]) first_error = workers[i].first_error;
    }
    double quantiles[] = {0.5, 0.9, 0.99, 1.0};
    uint64_t at[4] = {0};
    for (int q = 0; q < 4; q++) {
        uint64_t rank = (uint64_t)(quantiles[q] * (double)requests + 0.999999), seen = 0;
        if (rank == 0) continue;
        for (int b = 0; b < BUCKETS; b++) {
            seen += histogram[b];
            if (seen >= rank) {
                at[q] = bucket_middle(b);
                break;
            }
        }
    }
    double seconds = (double)(end - start) / 1e9;
    printf("tunnel_load: %d connections, %.1f s, %s %s, %s\n", options.connections, seconds,
           options.connect_target ? "CONNECT" : "straight to", options.connect_target ? options.connect_target : argv[optind],
           options.new_connection ? (options.resume ? "a new connection and resumed handshake per request" : "a new connection and full handshake per request")
                                   : "keep-alive");
    printf("  %llu requests, %.1f req/s; latency p50 %.1f us, p90 %.1f us, p99 %.1f us, max %.1f us\n",
           (unsigned long long)requests, (double)requests / seconds, at[0] / 1e3, at[1] / 1e3, at[2] / 1e3, at[3] / 1e3);
    printf("  errors %llu, non-200 %llu, TLS handshakes %llu of which resumed %llu (warm-up included)%s%s\n", (unsigned long long)errors,
           (unsigned long long)non200, (unsigned long long)handshakes, (unsigned long long)resumed, first_error ? "; first error: " : "",
           first_error ? first_error : "");
    printf("RESULT rps=%.1f p50_us=%.1f p90_us=%.1f p99_us=%.1f max_us=%.1f requests=%llu errors=%llu non200=%llu handshakes=%llu resumed=%llu\n",
           (double)requests / seconds, at[0] / 1e3, at[1] / 1e3, at[2] / 1e3, at[3] / 1e3, (unsigned long long)requests,
           (unsigned long long)errors, (unsigned long long)non200, (unsigned long long)handshakes, (unsigned long long)resumed);
    return 0;
}
