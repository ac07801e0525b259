#pragma once
/*
 * image_split_cases: the reference provider's image split ("os/series"; no '/' = custom),
 * shared by the tests of maas_split_image (test_maas_auth.c) and schema_image_split
 * (test_schema.c), which must agree. Each case: image, osystem, series.
 */

static const char *const image_split_cases[][3] = {
        { "rhel/rocky-92-0-k-1285-0", "rhel", "rocky-92-0-k-1285-0" },
        { "suse/sles-15-0-k-1304-0", "suse", "sles-15-0-k-1304-0" },
        { "ubuntu/u-2204-0-k-1329-0", "ubuntu", "u-2204-0-k-1329-0" },
        { "u-2204-0-k-1329-0", "custom", "u-2204-0-k-1329-0" },
        { "", "custom", "" },
        { "custom/u-2204-0-k-1264-0", "custom", "u-2204-0-k-1264-0" },
        { "a/b/c", "a", "b/c" },
};
