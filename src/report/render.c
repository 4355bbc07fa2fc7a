/* Renderer driver and what every renderer shares: checked output, names made safe to print. */
#include "report/report.h"
#include "format/json.h"

#include <errno.h>
#include <string.h>

int ml_report_render(FILE *f, const struct ml_renderer *rd, struct ml_report *const *reps,
                     struct ml_timeline *const *tls, size_t n, const struct ml_report_opts *o)
{
    if (rd->begin)
        rd->begin(f, o);
    for (size_t i = 0; i < n; i++) {
        int rc = rd->profile(f, reps[i], tls ? tls[i] : NULL, i, o);
        if (rc)
            return rc;
    }
    if (rd->end)
        rd->end(f, o);
    return ml_report_flush(f);
}

int ml_report_flush(FILE *f)
{
    errno = 0;
    if (fflush(f) == EOF || ferror(f))
        return errno ? -errno : -EIO;
    return 0;
}

const char *ml_report_esc(char *buf, size_t len, const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t o = 0;

    if (!len)
        return "";
    while (*s) {
        size_t n = ml_utf8_len(s);
        /* C1 controls (U+0080..U+009F) are two bytes, c2 80..c2 9f; some terminals obey them. */
        int ctl = n == 0 || (n == 1 && (*s < 0x20 || *s == 0x7f)) ||
                  (n == 2 && s[0] == 0xc2 && s[1] < 0xa0);
        size_t need = ctl ? 4 * (n ? n : 1) : n;
        if (o + need + 4 > len) { /* room for this, "..." and the NUL */
            if (o + 4 <= len) {
                memcpy(buf + o, "...", 3);
                o += 3;
            }
            break;
        }
        if (ctl) {
            for (size_t k = 0; k < (n ? n : 1); k++)
                o += (size_t)snprintf(buf + o, len - o, "\\x%02x", s[k]);
        } else {
            memcpy(buf + o, s, n);
            o += n;
        }
        s += n ? n : 1;
    }
    buf[o] = 0;
    return buf;
}
