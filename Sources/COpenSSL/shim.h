// OpenSSL 3 (Debian's libssl-dev, the library libcurl already loads) for the TLS module, and typed
// wrappers over the calls that are macros or C-variadic, which Swift cannot call directly.
#ifndef TOKENPROXY_COPENSSL_SHIM_H
#define TOKENPROXY_COPENSSL_SHIM_H
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ec.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/bn.h>

static inline int tp_ssl_ctx_set_versions(SSL_CTX *c, int min, int max) {
    return SSL_CTX_set_min_proto_version(c, min) == 1 && SSL_CTX_set_max_proto_version(c, max) == 1;
}
static inline long tp_ssl_ctx_set_servername_cb(SSL_CTX *c, int (*f)(SSL *, int *, void *)) {
    return SSL_CTX_set_tlsext_servername_callback(c, f);
}
static inline int tp_ssl_set_app_data(SSL *s, void *p) { return SSL_set_app_data(s, p); }
static inline void *tp_ssl_get_app_data(const SSL *s) { return SSL_get_app_data(s); }
static inline long tp_ssl_ctx_set_session_cache_mode(SSL_CTX *c, long m) { return SSL_CTX_set_session_cache_mode(c, m); }
// The options every server context gets (SSL_OP_* are 64-bit macros Swift does not import): no
// renegotiation (HTTP/1.1 needs none; RFC 8446 removed it), the server's cipher order, no compression
// (CRIME; RFC 8446 §4.1.2 allows only the null method).
static inline void tp_ssl_ctx_set_server_options(SSL_CTX *c) {
    SSL_CTX_set_options(c, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_COMPRESSION);
    // Partial writes: a short SSL_write answers like a short send(2), and a retry may come from a
    // buffer that moved (the caller's output buffer grows).
    SSL_CTX_set_mode(c, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
}
static inline STACK_OF(X509) *tp_x509_stack_new(void) { return sk_X509_new_null(); }
static inline int tp_x509_stack_push(STACK_OF(X509) *s, X509 *cert) { return sk_X509_push(s, cert); }
static inline void tp_x509_stack_free(STACK_OF(X509) *s) { sk_X509_pop_free(s, X509_free); }
// BIO_get_mem_data is a macro.
static inline long tp_bio_mem_data(BIO *b, char **data) { return BIO_get_mem_data(b, data); }
// A name as RFC 2253 writes it; XN_FLAG_RFC2253 is a macro of flags Swift does not import.
static inline int tp_x509_name_print_rfc2253(BIO *b, const X509_NAME *n) { return X509_NAME_print_ex(b, n, 0, XN_FLAG_RFC2253); }
// X509_NAME_add_entry_by_txt with MBSTRING_UTF8, a macro Swift does not import.
static inline int tp_x509_name_add(X509_NAME *n, const char *field, const char *value) {
    return X509_NAME_add_entry_by_txt(n, field, MBSTRING_UTF8, (const unsigned char *)value, -1, -1, 0);
}

// EVP_EC_gen is a macro over the C-variadic EVP_PKEY_Q_keygen.
static inline EVP_PKEY *tp_ec_p256_generate(void) { return EVP_EC_gen("P-256"); }

// A subjectAltName of one name, built from OpenSSL's own types (RFC 5280 §4.2.1.6): a dNSName, or an
// iPAddress from the literal's text (a2i_IPADDRESS parses it). The stack macros are awkward in Swift.
static inline int tp_x509_add_subject_alt_name(X509 *x, const char *name, int isAddress) {
    GENERAL_NAME *gen = GENERAL_NAME_new();
    if (gen == NULL) return 0;
    if (isAddress) {
        ASN1_OCTET_STRING *ip = a2i_IPADDRESS(name);
        if (ip == NULL) { GENERAL_NAME_free(gen); return 0; }
        GENERAL_NAME_set0_value(gen, GEN_IPADD, ip);
    } else {
        ASN1_IA5STRING *dns = ASN1_IA5STRING_new();
        if (dns == NULL || ASN1_STRING_set(dns, name, -1) != 1) { ASN1_IA5STRING_free(dns); GENERAL_NAME_free(gen); return 0; }
        GENERAL_NAME_set0_value(gen, GEN_DNS, dns);
    }
    GENERAL_NAMES *names = sk_GENERAL_NAME_new_null();
    if (names == NULL || sk_GENERAL_NAME_push(names, gen) == 0) { GENERAL_NAME_free(gen); sk_GENERAL_NAME_free(names); return 0; }
    int ok = X509_add1_ext_i2d(x, NID_subject_alt_name, names, 0, X509V3_ADD_DEFAULT);
    GENERAL_NAMES_free(names);
    return ok == 1;
}
#endif
