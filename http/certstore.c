/*
 * certstore: serving certificate with hot reload. The current generation is published
 * under a mutex held only for a pointer copy; replaced generations go on a retired list
 * and are freed by the watcher once they have been out of service for retire_ms, which is
 * longer than any handshake can last (the server's read timeout bounds it).
 *
 * Every load is logged: success at info with the leaf's subject and expiry, failure at warn
 * with the reason (once per changed file pair, not at every poll). A key file anyone but its
 * owner may write, or (outside a Kubernetes Secret volume) read, is warned about.
 */
#include "certstore.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gnutls/x509.h>

#include "clock.h"
#include "err.h"
#include "log.h"
#include "rfc3339.h"
#include "xalloc.h"

#define CERT_FILE_MAX (1u << 20)
#define CHAIN_MAX     16

struct generation {
        gnutls_pcert_st pcerts[CHAIN_MAX];
        unsigned n;
        gnutls_privkey_t key;
        time_t not_after;
        char *subject; /* the leaf's subject DN, for logs */
        uint64_t retired_at_ms;
        struct generation *next; /* retired list link */
};

struct file_id {
        dev_t dev;
        ino_t ino;
        off_t size;
        struct timespec mtime;
};

struct certstore {
        char *cert_path;
        char *key_path;
        uint64_t poll_ms;
        uint64_t retire_ms;
        struct file_id cert_id;
        struct file_id key_id;
        struct file_id failed_cert_id; /* the pair whose load failed last (logged once) */
        struct file_id failed_key_id;

        pthread_mutex_t lock; /* guards current; held for a pointer copy only */
        struct generation *current;
        struct generation *retired; /* watcher thread only */

        pthread_t thread;
        bool started;
        pthread_mutex_t stop_lock;
        pthread_cond_t stop_cond;
        bool stopping;

        _Atomic uint64_t reads;
        _Atomic uint64_t read_errors;
};

static struct generation *generation_free(struct generation *g)
{
        if (!g)
                return NULL;
        for (unsigned i = 0; i < g->n; i++)
                gnutls_pcert_deinit(&g->pcerts[i]);
        gnutls_privkey_deinit(g->key);
        free(g->subject);
        free(g);
        return NULL;
}

static int read_file(const char *path, gnutls_datum_t *ret, char **reterr)
{
        struct stat st;
        unsigned char *data = NULL;
        ssize_t n;
        int fd;
        int r = CM_EIO;

        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
                *reterr = xasprintf("%s: %s", path, strerrordesc_np(errno));
                return CM_EIO;
        }
        if (fstat(fd, &st) < 0 || st.st_size <= 0 || st.st_size > CERT_FILE_MAX) {
                *reterr = xasprintf("%s: empty, unreadable or larger than %u bytes", path,
                                    CERT_FILE_MAX);
                goto out;
        }
        data = xmalloc((size_t)st.st_size + 1);
        n = read(fd, data, (size_t)st.st_size);
        if (n != st.st_size) {
                *reterr = xasprintf("%s: short read", path);
                goto out;
        }
        data[n] = '\0';
        ret->data = data;
        ret->size = (unsigned)n;
        data = NULL;
        r = CM_OK;
out:
        free(data);
        close(fd);
        return r;
}

static bool key_matches_leaf(gnutls_privkey_t key, gnutls_pcert_st *leaf)
{
        unsigned char id_cert[64];
        unsigned char id_key[64];
        size_t n_cert = sizeof(id_cert);
        size_t n_key = sizeof(id_key);
        gnutls_pubkey_t pub = NULL;
        bool ok = false;

        if (gnutls_pubkey_init(&pub) < 0)
                return false;
        if (gnutls_pubkey_import_privkey(pub, key, 0, 0) < 0 ||
            gnutls_pubkey_get_key_id(pub, 0, id_key, &n_key) < 0 ||
            gnutls_pubkey_get_key_id(leaf->pubkey, 0, id_cert, &n_cert) < 0)
                goto out;
        ok = n_key == n_cert && memcmp(id_key, id_cert, n_key) == 0;
out:
        gnutls_pubkey_deinit(pub);
        return ok;
}

/* The leaf's expiry and subject (malloc'd; "" when it cannot be read). */
static void leaf_describe(const gnutls_pcert_st *leaf, time_t *ret_not_after, char **ret_subject)
{
        gnutls_x509_crt_t crt;
        gnutls_datum_t dn = { 0 };

        *ret_not_after = 0;
        *ret_subject = NULL;
        if (gnutls_x509_crt_init(&crt) == 0) {
                if (gnutls_x509_crt_import(crt, &leaf->cert, GNUTLS_X509_FMT_DER) == 0) {
                        *ret_not_after = gnutls_x509_crt_get_expiration_time(crt);
                        if (gnutls_x509_crt_get_dn3(crt, &dn, 0) == 0)
                                *ret_subject = xstrdup((const char *)dn.data);
                }
                gnutls_free(dn.data);
                gnutls_x509_crt_deinit(crt);
        }
        if (!*ret_subject)
                *ret_subject = xstrdup("");
}

/* A Kubernetes Secret (or ConfigMap, projected) volume: the kubelet's atomic writer keeps
 * the files in a timestamped directory behind a "..data" symlink, mode 0644 unless the
 * volume says otherwise. */
static bool on_secret_volume(const char *path)
{
        char *copy = xstrdup(path);
        char *data = xasprintf("%s/..data", dirname(copy));
        struct stat st;
        bool yes = lstat(data, &st) == 0 && S_ISLNK(st.st_mode);

        free(data);
        free(copy);
        return yes;
}

static void check_key_mode(const char *path)
{
        struct stat st;

        if (stat(path, &st) < 0)
                return;
        if (st.st_mode & (S_IWGRP | S_IWOTH))
                log_warn("certs", "private key file is writable by group or others",
                         "path=%s mode=%04o", path, (unsigned)(st.st_mode & 07777));
        else if ((st.st_mode & (S_IRGRP | S_IROTH)) && !on_secret_volume(path))
                log_warn("certs", "private key file is readable by group or others",
                         "path=%s mode=%04o hint=%s", path, (unsigned)(st.st_mode & 07777),
                         "chmod 600, or mount it from a Kubernetes Secret volume");
}

static void log_loaded(const struct certstore *cs, const struct generation *g, bool reload)
{
        char expiry[RFC3339_LEN];

        rfc3339_format(g->not_after, expiry);
        log_info("certs", reload ? "serving certificate reloaded" : "serving certificate loaded",
                 "cert=%s subject=%s not_after=%s", cs->cert_path, g->subject, expiry);
}

static int import_pair(struct generation *g,
                       const gnutls_datum_t *cert,
                       const gnutls_datum_t *key,
                       const struct certstore *cs,
                       char **reterr)
{
        int rc;

        g->n = CHAIN_MAX;
        rc = gnutls_pcert_list_import_x509_raw(g->pcerts, &g->n, cert, GNUTLS_X509_FMT_PEM, 0);
        if (rc < 0) {
                g->n = 0;
                *reterr = xasprintf("%s: %s", cs->cert_path, gnutls_strerror(rc));
                return CM_EPARSE;
        }
        rc = gnutls_privkey_init(&g->key);
        if (rc == 0)
                rc = gnutls_privkey_import_x509_raw(g->key, key, GNUTLS_X509_FMT_PEM, NULL, 0);
        if (rc < 0) {
                *reterr = xasprintf("%s: %s", cs->key_path, gnutls_strerror(rc));
                return CM_EPARSE;
        }
        if (g->n == 0 || !key_matches_leaf(g->key, &g->pcerts[0])) {
                *reterr = xasprintf("%s does not match the certificate in %s", cs->key_path,
                                    cs->cert_path);
                return CM_EINVAL;
        }
        leaf_describe(&g->pcerts[0], &g->not_after, &g->subject);
        return CM_OK;
}

static int load_generation(const struct certstore *cs, struct generation **ret, char **reterr)
{
        gnutls_datum_t cert = { 0 };
        gnutls_datum_t key = { 0 };
        struct generation *g = xcalloc(1, sizeof(*g));
        int r;

        r = read_file(cs->cert_path, &cert, reterr);
        if (r < 0)
                goto out;
        r = read_file(cs->key_path, &key, reterr);
        if (r < 0)
                goto out;
        r = import_pair(g, &cert, &key, cs, reterr);
        if (r < 0)
                goto out;
        check_key_mode(cs->key_path);
        *ret = g;
        g = NULL;
out:
        if (key.data)
                gnutls_memset(key.data, 0, key.size);
        free(key.data);
        free(cert.data);
        generation_free(g);
        return r;
}

static void file_id_get(const char *path, struct file_id *ret)
{
        struct stat st;

        if (stat(path, &st) < 0) {
                *ret = (struct file_id){ 0 };
                return;
        }
        *ret = (struct file_id){
                .dev = st.st_dev, .ino = st.st_ino, .size = st.st_size, .mtime = st.st_mtim
        };
}

static bool file_id_equal(const struct file_id *a, const struct file_id *b)
{
        return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
               a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec;
}

int certstore_new(const struct certstore_opts *opts, struct certstore **ret, char **reterr)
{
        struct certstore *cs = xcalloc(1, sizeof(*cs));
        pthread_condattr_t attr;
        int r;

        cs->cert_path = xstrdup(opts->cert_path);
        cs->key_path = xstrdup(opts->key_path);
        cs->poll_ms = opts->poll_ms ? opts->poll_ms : 1000;
        cs->retire_ms = opts->retire_ms ? opts->retire_ms : 120000;
        pthread_mutex_init(&cs->lock, NULL);
        pthread_mutex_init(&cs->stop_lock, NULL);
        pthread_condattr_init(&attr);
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        pthread_cond_init(&cs->stop_cond, &attr);
        pthread_condattr_destroy(&attr);

        file_id_get(cs->cert_path, &cs->cert_id);
        file_id_get(cs->key_path, &cs->key_id);
        r = load_generation(cs, &cs->current, reterr);
        if (r < 0) {
                atomic_fetch_add(&cs->read_errors, 1);
                certstore_free(cs);
                return r;
        }
        atomic_fetch_add(&cs->reads, 1);
        log_loaded(cs, cs->current, false);
        *ret = cs;
        return CM_OK;
}

static void retire(struct certstore *cs, struct generation *old)
{
        old->retired_at_ms = clock_now_ms(NULL);
        old->next = cs->retired;
        cs->retired = old;
}

static void free_expired_retirees(struct certstore *cs)
{
        struct generation **pp = &cs->retired;
        uint64_t now = clock_now_ms(NULL);

        while (*pp) {
                struct generation *g = *pp;

                if (now - g->retired_at_ms >= cs->retire_ms) {
                        *pp = g->next;
                        generation_free(g);
                } else {
                        pp = &g->next;
                }
        }
}

bool certstore_reload_if_changed(struct certstore *cs)
{
        struct file_id cert_id;
        struct file_id key_id;
        struct generation *g = NULL;
        struct generation *old;
        char *err = NULL;

        free_expired_retirees(cs);
        file_id_get(cs->cert_path, &cert_id);
        file_id_get(cs->key_path, &key_id);
        if (file_id_equal(&cert_id, &cs->cert_id) && file_id_equal(&key_id, &cs->key_id))
                return false;
        if (file_id_equal(&cert_id, &cs->failed_cert_id) &&
            file_id_equal(&key_id, &cs->failed_key_id))
                return false; /* this pair failed already and was logged */
        if (load_generation(cs, &g, &err) < 0) {
                /* Typically a rotation caught between the two renames: the next poll sees
                 * the finished pair. The old pair stays in service meanwhile. */
                atomic_fetch_add(&cs->read_errors, 1);
                log_warn("certs",
                         "serving certificate reload failed; the previous one stays in service",
                         "cert=%s reason=%s", cs->cert_path, err ? err : "unknown");
                cs->failed_cert_id = cert_id;
                cs->failed_key_id = key_id;
                free(err);
                return false;
        }
        log_loaded(cs, g, true);
        cs->cert_id = cert_id;
        cs->key_id = key_id;
        pthread_mutex_lock(&cs->lock);
        old = cs->current;
        cs->current = g;
        pthread_mutex_unlock(&cs->lock);
        retire(cs, old);
        atomic_fetch_add(&cs->reads, 1);
        return true;
}

static void *watch_main(void *arg)
{
        struct certstore *cs = arg;
        struct timespec deadline;

        pthread_mutex_lock(&cs->stop_lock);
        while (!cs->stopping) {
                clock_deadline_ts(cs->poll_ms, &deadline);
                (void)pthread_cond_timedwait(&cs->stop_cond, &cs->stop_lock, &deadline);
                if (cs->stopping)
                        break;
                pthread_mutex_unlock(&cs->stop_lock);
                (void)certstore_reload_if_changed(cs);
                pthread_mutex_lock(&cs->stop_lock);
        }
        pthread_mutex_unlock(&cs->stop_lock);
        return NULL;
}

int certstore_start(struct certstore *cs)
{
        if (pthread_create(&cs->thread, NULL, watch_main, cs) != 0)
                return CM_EIO;
        (void)pthread_setname_np(cs->thread, "certwatch");
        cs->started = true;
        return CM_OK;
}

void certstore_current(struct certstore *cs,
                       gnutls_pcert_st **ret_pcerts,
                       unsigned *ret_n,
                       gnutls_privkey_t *ret_key)
{
        struct generation *g;

        pthread_mutex_lock(&cs->lock);
        g = cs->current;
        pthread_mutex_unlock(&cs->lock);
        *ret_pcerts = g->pcerts;
        *ret_n = g->n;
        *ret_key = g->key;
}

void certstore_stats(struct certstore *cs, struct certstore_stats *ret)
{
        pthread_mutex_lock(&cs->lock);
        ret->not_after = cs->current ? cs->current->not_after : 0;
        ret->loaded = cs->current != NULL;
        pthread_mutex_unlock(&cs->lock);
        ret->reads = atomic_load(&cs->reads);
        ret->read_errors = atomic_load(&cs->read_errors);
}

struct certstore *certstore_free(struct certstore *cs)
{
        if (!cs)
                return NULL;
        if (cs->started) {
                pthread_mutex_lock(&cs->stop_lock);
                cs->stopping = true;
                pthread_cond_signal(&cs->stop_cond);
                pthread_mutex_unlock(&cs->stop_lock);
                pthread_join(cs->thread, NULL);
        }
        while (cs->retired) {
                struct generation *g = cs->retired;

                cs->retired = g->next;
                generation_free(g);
        }
        generation_free(cs->current);
        pthread_cond_destroy(&cs->stop_cond);
        pthread_mutex_destroy(&cs->stop_lock);
        pthread_mutex_destroy(&cs->lock);
        free(cs->cert_path);
        free(cs->key_path);
        free(cs);
        return NULL;
}
