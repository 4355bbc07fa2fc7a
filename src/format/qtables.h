/* Module tables sent through the event queue: sites and markers with their source locations. */
#ifndef ML_FORMAT_QTABLES_H
#define ML_FORMAT_QTABLES_H

#include <stdint.h>

/*
 * When a module built with `memlens cc --events` registers (its constructor
 * calls __memlens_q_register), the runtime gives it global site and marker
 * bases and sends its tables as one blob (format/queue.h) with tag
 * ML_QT_TAG, so that a profile names instructions by function and file:line
 * without side files. Layout, little-endian 32-bit words, strings not
 * NUL-terminated:
 *   header  magic, version, site_base, nsites, marker_base, nmarkers, name_len, name
 *   site    kind, size, marker (module-local, or ML_EV_NOID), line, column,
 *           func_len, file_len, func, file
 *   marker  kind, line, name_len, file_len, func_len, name, file, func
 * Readers (backend/sites.c) check every length against the blob.
 * Version rule: bump ML_QT_VERSION when the layout changes.
 */
#define ML_QT_TAG 0x4d4c5154ull /* "TQLM" */
/*
 * Empty blob: a module wants heap events but the program's malloc family is
 * not the runtime's interposers (linked without --events, a -static link, or
 * an allocator of the program's own), so none are sent
 * (docs/profile-modules.md, "lifetime").
 */
#define ML_QT_TAG_NOHEAP 0x504145484f4e4c4dull /* "MLNOHEAP" */
#define ML_QT_MAGIC      0x5451u
#define ML_QT_VERSION    1u

#endif
