/*
 * kube_config: where the API server is and how to authenticate. A kubeconfig file is read
 * (size-capped) and loaded with libyaml into a cJSON tree (every scalar a string), then the
 * selected context's cluster and user are picked out. *-data fields are decoded into memory
 * files (memfile.h), because libcurl's GnuTLS backend takes certificates only by path and
 * a key must not land on disk. Called once at start-up, from one thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yaml.h>

#include "base64.h"
#include "buf.h"
#include "err.h"
#include "kube_client.h"
#include "xalloc.h"

#define KUBECONFIG_MAX (4u * 1024u * 1024u)
#define YAML_DEPTH_MAX 64
#define YAML_NODES_MAX 200000u
#define SA_DIR         "/var/run/secrets/kubernetes.io/serviceaccount"

/* --- small file helpers --------------------------------------------------------------- */

/* Reads a whole file into a NUL-terminated string (caller frees). */
static int read_file(const char *path, size_t max, char **ret, size_t *ret_len)
{
        struct buf b;
        char chunk[8192];
        ssize_t n;
        int fd = open(path, O_RDONLY | O_CLOEXEC), r = 0;

        if (fd < 0)
                return errno == ENOENT ? CM_ENOTFOUND : CM_EIO;
        buf_init(&b, max);
        while (r == 0 && (n = read(fd, chunk, sizeof(chunk))) > 0)
                r = buf_append(&b, chunk, (size_t)n);
        if (r == 0 && n < 0)
                r = CM_EIO;
        close(fd);
        if (r < 0) {
                buf_release(&b);
                return r;
        }
        *ret = buf_take(&b, ret_len);
        return 0;
}

static void trim_right(char *s)
{
        size_t n = strlen(s);

        while (n > 0 &&
               (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t'))
                s[--n] = '\0';
}

/* --- YAML → cJSON --------------------------------------------------------------------- */

struct ydoc {
        yaml_document_t *doc;
        size_t nodes; /* produced so far: aliases cannot blow us up */
};

static cJSON *node_to_json(struct ydoc *y, yaml_node_t *n, int depth);

static cJSON *mapping_to_json(struct ydoc *y, yaml_node_t *n, int depth)
{
        cJSON *o = cJSON_CreateObject(), *v;
        yaml_node_pair_t *p;
        yaml_node_t *k;

        for (p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
                k = yaml_document_get_node(y->doc, p->key);
                v = node_to_json(y, yaml_document_get_node(y->doc, p->value), depth + 1);
                if (!k || k->type != YAML_SCALAR_NODE || !v) {
                        cJSON_Delete(v);
                        cJSON_Delete(o);
                        return NULL;
                }
                cJSON_AddItemToObject(o, (const char *)k->data.scalar.value, v);
        }
        return o;
}

static cJSON *sequence_to_json(struct ydoc *y, yaml_node_t *n, int depth)
{
        cJSON *a = cJSON_CreateArray(), *v;
        yaml_node_item_t *i;

        for (i = n->data.sequence.items.start; i < n->data.sequence.items.top; i++) {
                v = node_to_json(y, yaml_document_get_node(y->doc, *i), depth + 1);
                if (!v) {
                        cJSON_Delete(a);
                        return NULL;
                }
                cJSON_AddItemToArray(a, v);
        }
        return a;
}

static cJSON *node_to_json(struct ydoc *y, yaml_node_t *n, int depth)
{
        if (!n || depth > YAML_DEPTH_MAX || ++y->nodes > YAML_NODES_MAX)
                return NULL;
        switch (n->type) {
        case YAML_SCALAR_NODE:
                return cJSON_CreateString((const char *)n->data.scalar.value);
        case YAML_MAPPING_NODE:
                return mapping_to_json(y, n, depth);
        case YAML_SEQUENCE_NODE:
                return sequence_to_json(y, n, depth);
        default:
                return NULL;
        }
}

/* Parses YAML text into a cJSON tree. CM_EPARSE with a line/column message. */
static int yaml_load_json(const char *text, size_t len, cJSON **ret, char **reterr)
{
        yaml_parser_t parser;
        yaml_document_t doc;
        struct ydoc y = { .doc = &doc };
        cJSON *root = NULL;
        int r = CM_EPARSE;

        yaml_parser_initialize(&parser);
        yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
        if (!yaml_parser_load(&parser, &doc)) {
                *reterr = xasprintf("%s at line %zu column %zu",
                                    parser.problem ? parser.problem : "malformed YAML",
                                    parser.problem_mark.line + 1, parser.problem_mark.column + 1);
                yaml_parser_delete(&parser);
                return CM_EPARSE;
        }
        root = node_to_json(&y, yaml_document_get_root_node(&doc), 0);
        if (cJSON_IsObject(root)) {
                *ret = root;
                root = NULL;
                r = 0;
        } else {
                *reterr = xstrdup("not a YAML mapping (or nested too deeply)");
        }
        cJSON_Delete(root);
        yaml_document_delete(&doc);
        yaml_parser_delete(&parser);
        return r;
}

/* --- kubeconfig ----------------------------------------------------------------------- */

static const char *jstr(const cJSON *o, const char *key)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

        return cJSON_IsString(v) && v->valuestring[0] ? v->valuestring : NULL;
}

/* The `key` member of the entry of list[] named `name` ("clusters", "cluster", …). */
static const cJSON *named(const cJSON *root, const char *list, const char *key, const char *name)
{
        const cJSON *it;

        cJSON_ArrayForEach (it, cJSON_GetObjectItemCaseSensitive(root, list)) {
                const char *n = jstr(it, "name");

                if (n && name && strcmp(n, name) == 0)
                        return cJSON_GetObjectItemCaseSensitive(it, key);
        }
        return NULL;
}

/* What one load is working on. */
struct kc_load {
        const char *path;
        char *dir; /* the kubeconfig's directory, for relative paths */
        struct kube_config cfg;
        char *err;
};

static char *resolve(const struct kc_load *l, const char *p)
{
        return p[0] == '/' ? xstrdup(p) : xasprintf("%s/%s", l->dir, p);
}

/* Decodes base64 `data` into a memory file; *ret is its path. */
static int data_to_file(
        struct kc_load *l, const char *field, const char *data, const char *fname, char **ret)
{
        struct memfile *m = &l->cfg.data[l->cfg.n_data];
        unsigned char *raw = NULL;
        size_t n = 0;
        int r;

        if (base64_decode(data, strlen(data), &raw, &n) < 0) {
                l->err = xasprintf("%s is not valid base64", field);
                return CM_EPARSE;
        }
        if (l->cfg.n_data == KUBE_CONFIG_DATA_MAX)
                abort(); /* three fields at most, each taken once */
        r = memfile_open(m, fname, raw, n);
        free(raw);
        if (r < 0) {
                l->err = xasprintf("cannot hold %s in memory: %s", field, strerrordesc_np(errno));
                return r;
        }
        l->cfg.n_data++;
        *ret = xstrdup(m->path);
        return 0;
}

/* A file field: `<key>-data` (written out) beats `<key>` (a path, resolved). */
static int file_field(
        struct kc_load *l, const cJSON *o, const char *key, const char *fname, char **ret)
{
        char *dkey = xasprintf("%s-data", key);
        const char *data = jstr(o, dkey), *path = jstr(o, key);
        int r = 0;

        if (data)
                r = data_to_file(l, dkey, data, fname, ret);
        else if (path)
                *ret = resolve(l, path);
        free(dkey);
        return r;
}

static int load_cluster(struct kc_load *l, const cJSON *cl)
{
        const char *server = jstr(cl, "server"), *insecure;
        size_t n = server ? strlen(server) : 0;

        while (n > 0 && server[n - 1] == '/')
                n--; /* "https://h:6443/" is "https://h:6443"; "/" alone names nothing */
        if (!cJSON_IsObject(cl) || n == 0) {
                l->err = xstrdup("the context's cluster has no server");
                return CM_EINVAL;
        }
        l->cfg.server = xstrndup(server, n);
        insecure = jstr(cl, "insecure-skip-tls-verify");
        l->cfg.insecure_skip_verify = insecure && strcmp(insecure, "true") == 0;
        return file_field(l, cl, "certificate-authority", "ca.crt", &l->cfg.ca_file);
}

static int load_user(struct kc_load *l, const cJSON *u)
{
        const char *tok = jstr(u, "token"), *tf = jstr(u, "tokenFile");
        int r;

        if (!cJSON_IsObject(u))
                return 0; /* anonymous */
        if (tok)
                l->cfg.token = xstrdup(tok);
        if (tf)
                l->cfg.token_file = resolve(l, tf);
        r = file_field(l, u, "client-certificate", "client.crt", &l->cfg.client_cert_file);
        if (r == 0)
                r = file_field(l, u, "client-key", "client.key", &l->cfg.client_key_file);
        if (r == 0 && !l->cfg.client_cert_file != !l->cfg.client_key_file) {
                l->err = xstrdup("client-certificate and client-key must be given together");
                r = CM_EINVAL;
        }
        return r;
}

static int load_tree(struct kc_load *l, const cJSON *root, const char *context)
{
        const char *name = context ? context : jstr(root, "current-context");
        const cJSON *ctx = named(root, "contexts", "context", name);
        const char *ns;
        int r;

        if (!name) {
                l->err = xstrdup("no context given and no current-context set");
                return CM_EINVAL;
        }
        if (!cJSON_IsObject(ctx)) {
                l->err = xasprintf("context \"%s\" not found", name);
                return CM_EINVAL;
        }
        r = load_cluster(l, named(root, "clusters", "cluster", jstr(ctx, "cluster")));
        if (r == 0)
                r = load_user(l, named(root, "users", "user", jstr(ctx, "user")));
        ns = jstr(ctx, "namespace");
        l->cfg.namespace = xstrdup(ns ? ns : "default");
        return r;
}

static char *dir_of(const char *path)
{
        const char *slash = strrchr(path, '/');

        if (!slash)
                return xstrdup(".");
        return slash == path ? xstrdup("/") : xstrndup(path, (size_t)(slash - path));
}

int kube_config_from_kubeconfig(const char *path,
                                const char *context,
                                struct kube_config *ret,
                                char **reterr)
{
        struct kc_load l = { .path = path, .dir = dir_of(path) };
        cJSON *root = NULL;
        char *text = NULL;
        size_t len = 0;
        int r;

        r = read_file(path, KUBECONFIG_MAX, &text, &len);
        if (r < 0) {
                l.err = xstrdup(r == CM_ETOOBIG ? "file too large" : "cannot read the file");
                goto out;
        }
        r = yaml_load_json(text, len, &root, &l.err);
        if (r == 0)
                r = load_tree(&l, root, context);
        if (r == 0) {
                *ret = l.cfg;
                l.cfg = (struct kube_config){ 0 };
        }
out:
        if (r < 0 && reterr)
                *reterr = xasprintf("kubeconfig %s: %s", path, l.err ? l.err : "invalid");
        kube_config_release(&l.cfg);
        cJSON_Delete(root);
        free(text);
        free(l.err);
        free(l.dir);
        return r;
}

/* --- in-cluster ----------------------------------------------------------------------- */

static const char *env_get(char *const envp[], const char *name)
{
        size_t n = strlen(name);

        for (; envp && *envp; envp++)
                if (strncmp(*envp, name, n) == 0 && (*envp)[n] == '=')
                        return *envp + n + 1;
        return NULL;
}

int kube_config_in_cluster(const char *sa_dir,
                           char *const envp[],
                           struct kube_config *ret,
                           char **reterr)
{
        const char *host = env_get(envp, "KUBERNETES_SERVICE_HOST");
        const char *port = env_get(envp, "KUBERNETES_SERVICE_PORT");
        struct kube_config c = { 0 };
        char *ns = NULL, *path;

        sa_dir = sa_dir ? sa_dir : SA_DIR;
        if (!host || !host[0] || !port || !port[0]) {
                if (reterr)
                        *reterr = xstrdup("not in a cluster: KUBERNETES_SERVICE_HOST and "
                                          "KUBERNETES_SERVICE_PORT must be set");
                return CM_EINVAL;
        }
        c.token_file = xasprintf("%s/token", sa_dir);
        if (access(c.token_file, R_OK) != 0) {
                if (reterr)
                        *reterr = xasprintf("in-cluster: cannot read %s", c.token_file);
                kube_config_release(&c);
                return CM_EIO;
        }
        c.server = xasprintf(strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s", host, port);
        path = xasprintf("%s/ca.crt", sa_dir);
        if (access(path, R_OK) == 0)
                c.ca_file = path;
        else
                free(path);
        path = xasprintf("%s/namespace", sa_dir);
        if (read_file(path, 4096, &ns, NULL) == 0)
                trim_right(ns);
        free(path);
        c.namespace = ns && ns[0] ? ns : xstrdup("default");
        if (c.namespace != ns)
                free(ns);
        *ret = c;
        return 0;
}

int kube_config_load(const char *kubeconfig_flag,
                     char *const envp[],
                     struct kube_config *ret,
                     char **reterr)
{
        const char *env = env_get(envp, "KUBECONFIG");
        char *first;
        int r;

        if (kubeconfig_flag && kubeconfig_flag[0])
                return kube_config_from_kubeconfig(kubeconfig_flag, NULL, ret, reterr);
        if (env && env[0]) {
                /* a list of files: we read the first (no merging) */
                first = xstrndup(env, strcspn(env, ":"));
                r = kube_config_from_kubeconfig(first, NULL, ret, reterr);
                free(first);
                return r;
        }
        return kube_config_in_cluster(NULL, envp, ret, reterr);
}

/* --- release -------------------------------------------------------------------------- */

void kube_config_release(struct kube_config *c)
{
        if (!c)
                return;
        for (unsigned i = 0; i < c->n_data; i++)
                memfile_close(&c->data[i]);
        free(c->server);
        free(c->ca_file);
        free(c->client_cert_file);
        free(c->client_key_file);
        free(c->token);
        free(c->token_file);
        free(c->namespace);
        *c = (struct kube_config){ 0 };
}
