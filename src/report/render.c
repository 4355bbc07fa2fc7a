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

/* Characters of UTF-8 text (escaped names are valid UTF-8). */
static size_t cols_of(const char *s, size_t n)
{
    size_t c = 0;

    for (size_t i = 0; i < n; i++)
        c += ((unsigned char)s[i] & 0xc0) != 0x80;
    return c;
}

/* Length of "operator<", "operator<<=", "operator->" ... at s: angle brackets that nest nothing. */
static size_t operator_len(const char *s, const char *start)
{
    static const char *const ops[] = {"<=>", "<<=", ">>=", "<<", ">>", "<=", ">=", "->", "<", ">"};

    if (s - start < 8 || strncmp(s - 8, "operator", 8))
        return 0;
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
        if (!strncmp(s, ops[i], strlen(ops[i])))
            return strlen(ops[i]);
    return 0;
}

/*
 * Drops the parameter list (and const, &, noexcept after it) of a demangled
 * function name: "f<int>(std::vector<int> const&) const" becomes "f<int>".
 */
static void drop_params(char *s)
{
    size_t n = strlen(s);
    int depth = 0;

    while (n && strchr(" acefilnostvxp&", s[n - 1]) && s[n - 1] != ')')
        n--;
    if (!n || s[n - 1] != ')')
        return;
    for (size_t i = n; i-- > 1;) {
        depth += s[i] == ')' ? 1 : s[i] == '(' ? -1 : 0;
        if (!depth) {
            s[i] = 0;
            return;
        }
    }
}

/*
 * Drops the return type that demangled function templates start with:
 * "std::vector<int> ns::make<int>" becomes "ns::make<int>". The type ends at
 * the last space outside brackets that does not follow "operator".
 */
static void drop_return_type(char *s)
{
    int angle = 0, paren = 0;
    char *cut = NULL;

    for (char *r = s; *r; r++) {
        size_t op = operator_len(r, s);
        if (op)
            r += op - 1;
        else if (*r == '<')
            angle++;
        else if (*r == '>' && angle)
            angle--;
        else if (*r == '(' || *r == '{' || *r == '[')
            paren++;
        else if ((*r == ')' || *r == '}' || *r == ']') && paren)
            paren--;
        else if (*r == ' ' && !angle && !paren && (r - s < 8 || strncmp(r - 8, "operator", 8)))
            cut = r + 1;
    }
    if (cut && *cut)
        memmove(s, cut, strlen(cut) + 1);
}

/* The '>' that closes the template argument list opened at s, or NULL. */
static const char *closing(const char *s, const char *start)
{
    int d = 0;

    for (const char *r = s; *r; r++) {
        size_t op = operator_len(r, start);
        if (op)
            r += op - 1;
        else if (*r == '<')
            d++;
        else if (*r == '>' && --d == 0)
            return r;
    }
    return NULL;
}

/*
 * Replaces template argument lists opened at nesting `depth` with "<…>" where
 * that makes them shorter (so s never grows).
 */
static void collapse_templates(char *s, int depth)
{
    char out[ML_REPORT_LONG];
    size_t o = 0;
    int d = 0;

    for (const char *r = s; *r;) {
        size_t op = operator_len(r, s);
        const char *e;
        if (op) {
            memcpy(out + o, r, op);
            o += op;
            r += op;
            continue;
        }
        if (*r == '<' && d + 1 == depth && (e = closing(r, s)) && e - r > 4) {
            memcpy(out + o, "<\xe2\x80\xa6>", 5);
            o += 5;
            r = e + 1;
            continue;
        }
        if (*r == '<')
            d++;
        else if (*r == '>' && d > 0)
            d--;
        out[o++] = *r++;
    }
    memcpy(s, out, o);
    s[o] = 0;
}

const char *ml_report_cut(char *buf, size_t len, const char *name, size_t cols)
{
    char w[ML_REPORT_LONG];
    size_t n, head, tail, keep;
    const char *last = NULL;
    int depth = 0;

    if (!len)
        return "";
    snprintf(w, sizeof(w), "%s", name);
    if (cols_of(w, strlen(w)) <= cols || cols < 8) {
        snprintf(buf, len, "%s", w);
        return buf;
    }
    drop_params(w);
    drop_return_type(w);
    /* Template arguments from the innermost out, until the name fits. */
    for (const char *p = w; *p; p++)
        depth = *p == '<' && depth < 64 ? depth + 1 : depth;
    for (int d = depth; d >= 1 && cols_of(w, strlen(w)) > cols; d--)
        collapse_templates(w, d);
    n = strlen(w);
    if (cols_of(w, n) <= cols) {
        snprintf(buf, len, "%s", w);
        return buf;
    }
    /* Still too long: keep the leading scopes and the last name, "ns::…::name". */
    for (const char *p = w; (p = strstr(p, "::")); p += 2)
        last = p;
    if (last && cols_of(last, strlen(last)) + 8 <= cols) {
        size_t room = cols - cols_of(last, strlen(last)) - 1, h = 0;
        for (const char *p = w; (p = strstr(p, "::")) && p < last; p += 2)
            if (cols_of(w, (size_t)(p - w) + 2) <= room)
                h = (size_t)(p - w) + 2;
        if (h) {
            snprintf(buf, len, "%.*s\xe2\x80\xa6%s", (int)h, w, last);
            return buf;
        }
    }
    /* No scope to cut at: the start and the end, "…" between, on character boundaries. */
    head = (cols - 1) / 2;
    tail = cols - 1 - head;
    for (keep = 0; head; keep++)
        if (((unsigned char)w[keep + 1] & 0xc0) != 0x80)
            head--;
    for (n = strlen(w); tail; n--)
        if (((unsigned char)w[n - 1] & 0xc0) != 0x80)
            tail--;
    snprintf(buf, len, "%.*s\xe2\x80\xa6%s", (int)keep, w, w + n);
    return buf;
}
