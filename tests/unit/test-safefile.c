/* Unit tests of safe file creation (src/format/safefile.c): the directory walk's
 * link rules, O_EXCL creation and renames that never replace. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "../../src/format/safefile.c"

static char root[PATH_MAX / 2];

static const char *at(const char *rel)
{
    static char buf[4][PATH_MAX];
    static int k;

    k = (k + 1) % 4;
    snprintf(buf[k], sizeof(buf[k]), "%s/%s", root, rel);
    return buf[k];
}

/* The directory fd refers to the same directory as path. */
static void assert_same_dir(int fd, const char *path)
{
    struct stat a, b;

    assert_true(fd >= 0);
    assert_int_equal(fstat(fd, &a), 0);
    assert_int_equal(stat(path, &b), 0);
    assert_true(a.st_dev == b.st_dev && a.st_ino == b.st_ino);
    close(fd);
}

static int setup(void **state)
{
    (void)state;
    snprintf(root, sizeof(root), "%s/memlens-sf.XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(root))
        return -1;
    return mkdir(at("d"), 0755) || mkdir(at("d/e"), 0755);
}

static int teardown(void **state)
{
    char cmd[PATH_MAX + 16];

    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    return system(cmd);
}

static void test_walk(void **state)
{
    char where[PATH_MAX];
    struct stat st;

    (void)state;
    assert_same_dir(ml_sf_opendir(at("d/e"), 0, NULL, 0), at("d/e"));
    assert_same_dir(ml_sf_opendir(at("./d//e/../e/."), 0, NULL, 0), at("d/e"));
    assert_same_dir(ml_sf_opendir("/", 0, NULL, 0), "/");
    assert_same_dir(ml_sf_opendir("/../..", 0, NULL, 0), "/");
    assert_int_equal(ml_sf_opendir("relative", 0, NULL, 0), -EINVAL);
    assert_int_equal(ml_sf_opendir(at("none/x"), 0, where, sizeof(where)), -ENOENT);
    assert_string_equal(where, at("none"));
    /* create: missing components, mode 0700 */
    assert_same_dir(ml_sf_opendir(at("new/a/b"), 1, NULL, 0), at("new/a/b"));
    assert_int_equal(stat(at("new/a"), &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    /* a file on the way */
    assert_int_equal(close(open(at("file"), O_CREAT | O_WRONLY, 0600)), 0);
    assert_int_equal(ml_sf_opendir(at("file/x"), 1, where, sizeof(where)), -ENOTDIR);
    assert_string_equal(where, at("file"));
}

static void test_links(void **state)
{
    char where[PATH_MAX];

    (void)state;
    /* Our own links: relative, absolute, chained, to "..", as the last component. */
    assert_int_equal(symlink("d/e", at("rel")), 0);
    assert_int_equal(symlink(at("d"), at("abs")), 0);
    assert_int_equal(symlink("rel", at("chain")), 0);
    assert_int_equal(symlink("..", at("d/e/up")), 0);
    assert_same_dir(ml_sf_opendir(at("rel"), 0, NULL, 0), at("d/e"));
    assert_same_dir(ml_sf_opendir(at("abs/e"), 0, NULL, 0), at("d/e"));
    assert_same_dir(ml_sf_opendir(at("chain/up/e"), 0, NULL, 0), at("d/e"));
    assert_same_dir(ml_sf_opendir(at("chain/new"), 1, NULL, 0), at("d/e/new"));
    /* A loop ends. */
    assert_int_equal(symlink("loop", at("loop")), 0);
    assert_int_equal(ml_sf_opendir(at("loop/x"), 1, NULL, 0), -ELOOP);
    /* Another user's link is refused, wherever it is. */
    if (geteuid() == 0) {
        assert_int_equal(symlink("d", at("foreign")), 0);
        assert_int_equal(lchown(at("foreign"), 65534, 65534), 0);
        assert_int_equal(ml_sf_opendir(at("foreign"), 0, where, sizeof(where)), -EPERM);
        assert_string_equal(where, at("foreign"));
        assert_int_equal(ml_sf_opendir(at("foreign/e"), 1, NULL, 0), -EPERM);
        assert_int_equal(symlink("foreign", at("via")), 0);
        assert_int_equal(ml_sf_opendir(at("via/e"), 0, where, sizeof(where)), -EPERM);
        assert_string_equal(where, at("foreign"));
    }
}

static void test_create_commit(void **state)
{
    int dir, fd;
    struct stat st;
    char buf[16] = "";

    (void)state;
    dir = ml_sf_opendir(at("d"), 0, NULL, 0);
    assert_true(dir >= 0);
    umask(0277);
    fd = ml_sf_create(dir, "f.tmp");
    umask(022);
    assert_true(fd >= 0);
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(write(fd, "new", 3), 3);
    close(fd);
    /* Anything under the name, a link included, makes creation fail: nothing is followed. */
    assert_int_equal(ml_sf_create(dir, "f.tmp"), -EEXIST);
    assert_int_equal(symlink(at("victim"), at("d/l.tmp")), 0);
    assert_int_equal(ml_sf_create(dir, "l.tmp"), -EEXIST);
    assert_int_equal(access(at("victim"), F_OK), -1);
    /* A rename never replaces. */
    assert_int_equal(close(open(at("d/f"), O_CREAT | O_WRONLY, 0600)), 0);
    assert_int_equal(ml_sf_commit(dir, "f.tmp", "f"), -EEXIST);
    assert_int_equal(ml_sf_commit(dir, "f.tmp", "g"), 0);
    fd = open(at("d/g"), O_RDONLY);
    assert_int_equal(read(fd, buf, sizeof(buf)), 3);
    assert_string_equal(buf, "new");
    close(fd);
    assert_int_equal(access(at("d/f.tmp"), F_OK), -1);
    close(dir);
    assert_string_equal(ml_sf_strerror(ENOSPC), "No space left on device");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_walk),
        cmocka_unit_test(test_links),
        cmocka_unit_test(test_create_commit),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
