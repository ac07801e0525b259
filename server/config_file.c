/*
 * config_file: the YAML file given by --config: a single document holding a mapping of
 * option names to scalar values, each set through the same setter as a flag. Errors name
 * the file, line and column.
 */
#include <stdarg.h>
#include <stdlib.h>

#include <yaml.h>

#include "config_priv.h"
#include "err.h"
#include "xalloc.h"

/* ---- YAML file ---- */

static int node_fail(
        int r, const char *path, const yaml_node_t *node, char **reterr, const char *fmt, ...)
        PRINTF_LIKE(5, 6);

static int node_fail(
        int r, const char *path, const yaml_node_t *node, char **reterr, const char *fmt, ...)
{
        va_list ap;
        char *msg;

        va_start(ap, fmt);
        msg = xvasprintf(fmt, ap);
        va_end(ap);
        *reterr = xasprintf("%s:%zu:%zu: %s", path, node->start_mark.line + 1,
                            node->start_mark.column + 1, msg);
        free(msg);
        return r;
}

/* A plain scalar that YAML reads as null: "", "~", "null". */
static bool node_is_null(const yaml_node_t *node)
{
        static const char *const nulls[] = { "", "~", "null", "Null", "NULL" };

        if (node->type != YAML_SCALAR_NODE || node->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
                return false;
        return config_name_index(nulls, ARRAY_SIZE(nulls), (const char *)node->data.scalar.value) >=
               0;
}

static int yaml_apply_pair(struct config *c,
                           const char *path,
                           yaml_document_t *doc,
                           const yaml_node_pair_t *pair,
                           bool seen[],
                           char **reterr)
{
        yaml_node_t *kn = yaml_document_get_node(doc, pair->key);
        yaml_node_t *vn = yaml_document_get_node(doc, pair->value);
        const struct cfg_key *k = NULL;
        char *where;
        int r;

        if (kn->type == YAML_SCALAR_NODE)
                k = config_key_find((const char *)kn->data.scalar.value, kn->data.scalar.length);
        if (kn->type != YAML_SCALAR_NODE)
                return node_fail(CM_EINVAL, path, kn, reterr, "expected an option name");
        if (!k || ((k->deny & SRC_FILE) && !k->deny_hint))
                return node_fail(CM_EINVAL, path, kn, reterr, "unknown key \"%s\"",
                                 (const char *)kn->data.scalar.value);
        if (k->deny & SRC_FILE)
                return node_fail(CM_EINVAL, path, kn, reterr, "%s: not accepted in a file; %s",
                                 k->name, k->deny_hint);
        if (seen[k - config_keys])
                return node_fail(CM_EINVAL, path, kn, reterr, "duplicate key \"%s\"", k->name);
        seen[k - config_keys] = true;
        if (vn->type != YAML_SCALAR_NODE)
                return node_fail(CM_EINVAL, path, vn, reterr, "%s: expected a single value",
                                 k->name);
        if (node_is_null(vn))
                return node_fail(CM_EINVAL, path, vn, reterr, "%s: missing value", k->name);
        where = xasprintf("%s:%zu:%zu: %s", path, vn->start_mark.line + 1,
                          vn->start_mark.column + 1, k->name);
        r = config_key_set(c, k, (const char *)vn->data.scalar.value, where, reterr);
        free(where);
        return r;
}

static int yaml_apply_root(struct config *c, const char *path, yaml_document_t *doc, char **reterr)
{
        yaml_node_t *root = yaml_document_get_root_node(doc);
        bool *seen;
        int r = 0;

        if (!root || node_is_null(root))
                return 0; /* an empty file sets nothing */
        if (root->type != YAML_MAPPING_NODE)
                return node_fail(CM_EPARSE, path, root, reterr,
                                 "expected a mapping of option names to values");
        seen = xcalloc(config_keys_n, sizeof(*seen));
        for (yaml_node_pair_t *p = root->data.mapping.pairs.start;
             r == 0 && p < root->data.mapping.pairs.top; p++)
                r = yaml_apply_pair(c, path, doc, p, seen, reterr);
        free(seen);
        return r;
}

static int yaml_syntax_error(const char *path, const yaml_parser_t *parser, char **reterr)
{
        *reterr = xasprintf("%s:%zu:%zu: invalid YAML: %s%s%s%s", path,
                            parser->problem_mark.line + 1, parser->problem_mark.column + 1,
                            parser->problem ? parser->problem : "syntax error",
                            parser->context ? " (" : "", parser->context ? parser->context : "",
                            parser->context ? ")" : "");
        return CM_EPARSE;
}

/* After the first document only the end of the stream may follow. */
static int yaml_check_single(const char *path, yaml_parser_t *parser, char **reterr)
{
        yaml_document_t doc;
        yaml_node_t *root;
        int r = 0;

        if (!yaml_parser_load(parser, &doc))
                return yaml_syntax_error(path, parser, reterr);
        root = yaml_document_get_root_node(&doc);
        if (root)
                r = node_fail(CM_EPARSE, path, root, reterr, "expected a single YAML document");
        yaml_document_delete(&doc);
        return r;
}

int config_file_apply(struct config *c, const char *path, char **reterr)
{
        yaml_parser_t parser;
        yaml_document_t doc;
        bool parser_ready = false;
        char *data = NULL;
        size_t len = 0;
        int r;

        r = config_read_file_capped(path, CONFIG_FILE_MAX, &data, &len, reterr);
        if (r < 0)
                goto out;
        parser_ready = yaml_parser_initialize(&parser) != 0;
        if (!parser_ready) {
                *reterr = xasprintf("%s: cannot initialise the YAML parser", path);
                r = CM_ENOMEM;
                goto out;
        }
        yaml_parser_set_input_string(&parser, (const unsigned char *)data, len);
        if (!yaml_parser_load(&parser, &doc)) {
                r = yaml_syntax_error(path, &parser, reterr);
                goto out;
        }
        r = yaml_apply_root(c, path, &doc, reterr);
        yaml_document_delete(&doc);
        if (r == 0)
                r = yaml_check_single(path, &parser, reterr);
out:
        if (parser_ready)
                yaml_parser_delete(&parser);
        free(data);
        return r;
}
