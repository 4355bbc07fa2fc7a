/* JSON output helpers shared by every command that writes JSON (report, profile). */
#ifndef ML_FORMAT_JSON_H
#define ML_FORMAT_JSON_H

#include <stdio.h>

/* Writes str as a JSON string; bytes that are not UTF-8 become U+FFFD. */
void ml_json_str(FILE *f, const char *str);

#endif
