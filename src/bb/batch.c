/* Batch files of memlens bb: bounded line reading, CSV fields, the resume scan of an output. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "bb/bb.h"

ssize_t ml_bb_line_read(FILE *f, char *buf, size_t cap, int *cut)
{
    size_t n = 0;
    int c = 0;

    *cut = 0;
    while (n + 1 < cap && (c = getc_unlocked(f)) != EOF) {
        buf[n++] = (char)c;
        if (c == '\n')
            break;
    }
    buf[n] = 0;
    if (n + 1 == cap && c != '\n' && c != EOF) {
        /* a longer line: drop the rest, so that memory stays bounded whatever the file */
        while ((c = getc_unlocked(f)) != EOF && c != '\n')
            ;
        *cut = 1;
    }
    if (ferror(f))
        return -EIO;
    return (ssize_t)n;
}

int ml_bb_csv_field(const char *line, unsigned index, char *out, size_t cap)
{
    const char *p = line;
    size_t n = 0;
    int big = 0;

    for (unsigned i = 0; i < index; i++) { /* skip fields, quoted ones whole */
        int quoted = 0;

        for (; *p && (quoted || (*p != ',' && *p != '\n' && *p != '\r')); p++)
            if (*p == '"')
                quoted = !quoted;
        if (*p != ',')
            return -ENOENT;
        p++;
    }
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p == '"') {
        for (p++; *p; p++) {
            if (*p == '"' && p[1] != '"')
                break;
            if (*p == '"')
                p++;
            if (n + 1 < cap)
                out[n++] = *p;
            else
                big = 1;
        }
    } else {
        size_t len = strcspn(p, ",\r\n");

        while (len && (p[len - 1] == ' ' || p[len - 1] == '\t'))
            len--;
        big = len >= cap;
        n = big ? cap - 1 : len;
        memcpy(out, p, n);
    }
    out[n] = 0;
    return big ? -E2BIG : 0;
}

int ml_bb_resume_scan(FILE *f, const char *header, struct ml_bb_resume *rs)
{
    static const char *const statuses[] = {"ok", "unclean", "crashed", "unsupported", "timeout"};
    char line[ML_BB_LINE_MAX], status[16];
    ssize_t n;
    int cut;

    rs->rows = 0;
    rs->end = 0;
    rs->last[0] = 0;
    while ((n = ml_bb_line_read(f, line, sizeof(line), &cut)) > 0) {
        unsigned k;

        if (cut)
            return -EINVAL;
        if (line[n - 1] != '\n')
            break; /* a torn row (killed mid-write): written again on resume */
        if (strlen(line) != (size_t)n)
            return -EINVAL;
        if (rs->end == 0) {
            if (strcmp(line, header))
                return -EINVAL;
            rs->end = n;
            continue;
        }
        if (ml_bb_csv_field(line, ML_BB_CSV_FIELDS - 1, status, sizeof(status)) == -ENOENT ||
            ml_bb_csv_field(line, 5, status, sizeof(status)))
            return -EINVAL;
        for (k = 0; k < 5 && strcmp(status, statuses[k]); k++)
            ;
        if (k == 5)
            return -EINVAL;
        ml_bb_csv_field(line, 0, rs->last, sizeof(rs->last));
        rs->rows++;
        rs->end += n;
    }
    return n < 0 ? (int)n : 0;
}
