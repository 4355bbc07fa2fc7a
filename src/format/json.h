/* JSON output helpers shared by every command that writes JSON (report, profile). */
#ifndef ML_FORMAT_JSON_H
#define ML_FORMAT_JSON_H

#include <stddef.h>
#include <stdio.h>

/* Writes str as a JSON string; bytes that are not UTF-8 become U+FFFD. */
void ml_json_str(FILE *f, const char *str);
/* Length of the valid UTF-8 sequence at s, or 0 if s does not start one. */
size_t ml_utf8_len(const unsigned char *s);

#endif
