/*
 * config_help: --help, generated from the KEY TABLE: every option with its environment
 * variable and default, grouped as the table groups them.
 */
#include <stdio.h>
#include <string.h>

#include "config_priv.h"

/* ---- help ---- */

static const char help_intro[] =
        "Usage: capmaas [flags]\n"
        "\n"
        "capmaas is the Cluster API infrastructure provider for Canonical MAAS: the\n"
        "admission webhooks and the MaasCluster and MaasMachine controllers.\n"
        "\n"
        "Every option can be given as a flag (--name=value or --name value; booleans as\n"
        "--name or --name=false; one dash works too), as the environment variable shown,\n"
        "or as \"name: value\" in the YAML file given by --config. Flags win over the\n"
        "environment, the environment over the file, the file over the defaults. Empty\n"
        "environment variables are ignored.\n";

/* Writes text indented by 6 spaces and wrapped at HELP_WIDTH columns on spaces. */
static void help_wrapped(FILE *out, const char *text)
{
        const size_t width = HELP_WIDTH - 6;
        size_t cut;

        while (*text) {
                cut = strlen(text);
                if (cut > width) {
                        for (cut = width; cut > 0 && text[cut] != ' '; cut--)
                                ;
                        if (cut == 0)
                                cut = strcspn(text, " ");
                }
                fprintf(out, "      %.*s\n", (int)cut, text);
                text += cut;
                text += strspn(text, " ");
        }
}

static void help_names(FILE *out, const struct cfg_key *k)
{
        const char *metavar = k->metavar ? k->metavar : config_type_metavar(k->type);

        if (k->deny & SRC_FLAG) {
                fprintf(out, "  (environment only: %s)\n", k->alias_env ? k->alias_env : k->name);
                return;
        }
        fputs("  ", out);
        if (k->short_name)
                fprintf(out, "-%s, ", k->short_name);
        fprintf(out, "%s%s%s%s\n", strlen(k->name) == 1 ? "-" : "--", k->name, *metavar ? " " : "",
                metavar);
}

static void help_default(FILE *out, const struct cfg_key *k)
{
        if (k->secret || !k->def)
                return;
        fputs("      default: ", out);
        if (k->default_env)
                fprintf(out, "$%s, else ", k->default_env);
        if (k->type == CFG_STRING)
                fprintf(out, "\"%s\"\n", k->def);
        else
                fprintf(out, "%s\n", k->def);
}

static void help_env(FILE *out, const struct cfg_key *k)
{
        char name[ENV_NAME_MAX];

        if (k->deny & SRC_ENV)
                return;
        config_env_name(k, name);
        fprintf(out, "      env: %s%s%s%s\n", name, k->alias_env ? ", " : "",
                k->alias_env ? k->alias_env : "", k->alias_env ? " (the first wins)" : "");
}

void config_print_help(FILE *out)
{
        fputs(help_intro, out);
        for (int g = 0; g < GROUP_COUNT; g++) {
                fprintf(out, "\n%s:\n", config_group_titles[g]);
                for (size_t i = 0; i < config_keys_n; i++) {
                        if ((int)config_keys[i].group != g)
                                continue;
                        help_names(out, &config_keys[i]);
                        help_wrapped(out, config_keys[i].help);
                        help_default(out, &config_keys[i]);
                        help_env(out, &config_keys[i]);
                }
        }
}
