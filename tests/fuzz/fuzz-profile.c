/* libFuzzer target: the profile reader, then every report renderer (timelines too) on what it
 * accepts. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "format/profile.h"
#include "report/merge.h"
#include "report/report.h"
#include "report/timeline.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *sink;
    struct ml_profile *p;
    struct ml_report *r;
    struct ml_timeline *t;
    char err[256];
    /* The first region name also drives the filter, so filtered paths get fuzzed. */
    const char *names[1];
    struct ml_report_opts all = {.rows = ML_REPORT_THREADS_AND_TOTALS};
    struct ml_report_opts one = {.rows = ML_REPORT_TOTALS, .regions = names, .nregion_names = 1};

    if (!sink)
        sink = fopen("/dev/null", "w");
    if (ml_profile_parse(data, size, &p, err, sizeof(err)))
        return 0;
    if (ml_report_build(p, "fuzz.mlp", &r)) {
        ml_profile_free(p);
        return 0;
    }
    ml_report_render(sink, &ml_render_table, &r, NULL, 1, &all);
    ml_report_render(sink, &ml_render_csv, &r, NULL, 1, &all);
    ml_report_render(sink, &ml_render_blocks, &r, NULL, 1, &all);
    ml_report_render(sink, &ml_render_json, &r, NULL, 1, &all);
    all.top = 3;
    ml_report_render(sink, &ml_render_top, &r, NULL, 1, &all);
    ml_report_render(sink, &ml_render_top_csv, &r, NULL, 1, &all);
    ml_report_render(sink, &ml_render_top_json, &r, NULL, 1, &all);
    if (ml_timeline_build(r, &t) == 0) {
        ml_report_render(sink, &ml_render_timeline, &r, &t, 1, &all);
        ml_report_render(sink, &ml_render_timeline_csv, &r, &t, 1, &all);
        ml_report_render(sink, &ml_render_html, &r, &t, 1, &all);
        ml_timeline_free(t);
    }
    if (p->nregions) {
        names[0] = ml_profile_str(p, p->regions[0]);
        ml_report_render(sink, &ml_render_table, &r, NULL, 1, &one);
        ml_report_render(sink, &ml_render_csv, &r, NULL, 1, &one);
        ml_report_render(sink, &ml_render_json, &r, NULL, 1, &one);
    }
    /* --merge of the profile with a second copy of itself: same tables, so one group. */
    {
        struct ml_merge *m = ml_merge_new();
        struct ml_profile *q;
        const struct ml_profile *mp;
        struct ml_report *mr;
        const char *name;
        if (m && !ml_merge_add(m, p, r) && !ml_profile_parse(data, size, &q, err, sizeof(err)) &&
            !ml_merge_add(m, q, r) && (mp = ml_merge_profile(m, 0, &name)) &&
            !ml_report_build(mp, name, &mr)) {
            ml_report_render(sink, &ml_render_table, &mr, NULL, 1, &all);
            ml_report_render(sink, &ml_render_json, &mr, NULL, 1, &all);
            ml_report_free(mr);
        }
        p = NULL; /* the merge owns it */
        ml_merge_free(m);
    }
    ml_report_free(r);
    ml_profile_free(p);
    return 0;
}
