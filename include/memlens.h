/* memlens user API: mark regions of interest and semantic markers in C and C++. */
/* SPDX-License-Identifier: MIT-0 */
/* This file only: copy it into any project, no notice needed (see docs/cc.md). */
#ifndef MEMLENS_H
#define MEMLENS_H

/*
 * MEMLENS_ROI_BEGIN("name") ... MEMLENS_ROI_END("name")
 *
 * The name is a non-empty string literal; regions with the same name, in any
 * file, are one region. A region counts the instructions and memory accesses
 * executed between its BEGIN and its END, including those of functions called
 * from it whose bodies memlens compiled. Regions nest (an inner region's work
 * also counts for the outer one) and may recurse (a region entered again while
 * open counts once). A region also ends, without its END, when control leaves
 * the code that only its BEGIN leads to: a return from the function that began
 * it, a break, continue or goto out of it. An END belongs in the function of
 * its BEGIN. See docs/regions.md.
 *
 * Built with memlens-cc / memlens-c++ (which define __MEMLENS__) the macros
 * call the memlens runtime; with any other compiler they expand to nothing
 * (a void expression) and this header needs nothing else: projects may copy it
 * so that annotated sources also build without memlens.
 */
/*
 * Memory traces (memlens cc --trace): MEMLENS_MARK("name") puts a marker in
 * the trace that starts phase "name" of the calling thread (until its next
 * mark); MEMLENS_TRACE_OFF() and MEMLENS_TRACE_ON() stop and resume
 * recording accesses (process-wide; markers are always recorded);
 * MEMLENS_PAGES(p, n) records the physical frames of the pages of [p, p+n)
 * when the kernel shows them. Region markers also appear in traces. Without
 * a trace build they do nothing. See docs/trace.md.
 */
#if defined(__MEMLENS__)
#ifdef __cplusplus
extern "C" {
#endif
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wunknown-warning-option"
#pragma clang diagnostic ignored "-Wreserved-identifier"
#pragma clang diagnostic ignored "-Wgcc-compat"
/* Bad names are compile errors at the marker, with clang's caret and macro notes. */
#if defined(__has_attribute)
#if __has_attribute(diagnose_if)
#define MEMLENS_NAME_CHECK_                                                                        \
    __attribute__((                                                                                \
        diagnose_if(!__builtin_constant_p(name), "region name is not a string literal", "error"))) \
    __attribute__((diagnose_if(__builtin_constant_p(name) && (!name || !*name),                    \
                               "region name is empty", "error")))
#endif
#endif
#ifndef MEMLENS_NAME_CHECK_
#define MEMLENS_NAME_CHECK_
#endif
/* nothrow: C++ must emit plain calls, never invokes, even with live destructors around. */
void __memlens_roi_begin(const char *name) __attribute__((nothrow)) MEMLENS_NAME_CHECK_;
void __memlens_roi_end(const char *name) __attribute__((nothrow)) MEMLENS_NAME_CHECK_;
/* The same checks for annotation markers (below): named only in sizeof, it generates no code. */
int __memlens_name_check(const char *name) MEMLENS_NAME_CHECK_;
void __memlens_mark(const char *name) __attribute__((nothrow));
void __memlens_trace_on(void) __attribute__((nothrow));
void __memlens_trace_off(void) __attribute__((nothrow));
void __memlens_pages(const void *p, unsigned long n) __attribute__((nothrow));
#undef MEMLENS_NAME_CHECK_
#pragma clang diagnostic pop
#ifdef __cplusplus
}
#endif
#if defined(__MEMLENS_CC__) && defined(__clang__)
/*
 * memlens cc instruments the optimised code: until then the markers are
 * annotations, which the optimiser knows touch none of the program's memory,
 * so marked code is optimised like unmarked code (docs/regions.md, "The
 * optimiser and the markers"). The instrumenter turns them into runtime calls.
 */
#define MEMLENS_ROI_BEGIN(name)                                                                    \
    ((void)sizeof(__memlens_name_check(name)), (void)__builtin_annotation(0x4d4c5242, name))
#define MEMLENS_ROI_END(name)                                                                      \
    ((void)sizeof(__memlens_name_check(name)), (void)__builtin_annotation(0x4d4c5245, name))
#else
#define MEMLENS_ROI_BEGIN(name) __memlens_roi_begin(name)
#define MEMLENS_ROI_END(name)   __memlens_roi_end(name)
#endif
#define MEMLENS_MARK(name)      __memlens_mark(name)
#define MEMLENS_TRACE_ON()      __memlens_trace_on()
#define MEMLENS_TRACE_OFF()     __memlens_trace_off()
#define MEMLENS_PAGES(p, n)     __memlens_pages((p), (n))
#else
#define MEMLENS_ROI_BEGIN(name) ((void)0)
#define MEMLENS_ROI_END(name)   ((void)0)
#define MEMLENS_MARK(name)      ((void)0)
#define MEMLENS_TRACE_ON()      ((void)0)
#define MEMLENS_TRACE_OFF()     ((void)0)
#define MEMLENS_PAGES(p, n)     ((void)0)
#endif

#endif
