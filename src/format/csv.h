/* CSV output helpers shared by every command that writes CSV (report, bb). */
#ifndef ML_FORMAT_CSV_H
#define ML_FORMAT_CSV_H

#include <stdio.h>

/* Writes s as one RFC 4180 field: quoted when it holds a comma, quote or line break. */
void ml_csv_str(FILE *f, const char *s);

#endif
