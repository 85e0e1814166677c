/*
 * The I/O recorder of the power-loss tests (see tests/powerloss.rs).
 *
 * Preloaded (LD_PRELOAD) into the child process, it records every
 * state-changing file operation on paths under $AJ_PL_DIR to the append-only
 * log $AJ_PL_LOG, in the order they took effect, so that the parent can
 * rebuild the on-disk states a power cut could leave. Writes to the file
 * $AJ_PL_MARK (outside the directory) are recorded too, as MARK records:
 * the child writes a line there each time an append is acknowledged, so the
 * log places each acknowledgement among the I/O.
 *
 * Without $AJ_PL_DIR the shim passes everything through untouched.
 *
 * Ordering. One mutex guards the log and the table of tracked descriptors.
 * Name operations (open of a tracked path, rename, unlink, mkdir, rmdir,
 * close, dup) and ftruncate/fallocate run *inside* the mutex, so the log
 * holds them in the order the kernel applied them; those that change the
 * disk are preceded by an INTENT record, so that a log whose last record is
 * an INTENT says the process was killed while (or right after) making it. Writes and syncs run
 * outside it (they block, and concurrency is what is under test): a BEGIN
 * record is logged before the call and an END record after it returns. A
 * write is complete at its END; a sync covers the writes whose END precedes
 * its BEGIN, and holds once its END is logged. A truncation or allocation
 * waits until no write is between its BEGIN and END: a write whose call had
 * returned before a truncation but whose END came after it would otherwise
 * be modelled as applied after the truncation (a file modelled longer than
 * the one the process left). Every record is written to
 * the log with one writev, so a SIGKILL can cut at most the last one.
 *
 * Record (little-endian, 48-byte header, then path1, path2, data):
 *   u32 magic 'PLR1', u8 op, u8[3] 0, i32 fd, i32 arg, u64 id, u64 off,
 *   u64 len, u32 path1_len, u32 path2_len
 * `id` pairs a BEGIN with its END; `len` is the byte count of the data that
 * follows (writes, marks), or the new length (truncate), or the length of a
 * range (fallocate, sync_file_range). `arg` is the open flags, the sync kind,
 * the fallocate mode, or the result of a write (<0: failed).
 *
 * Built by the test: cc -shared -fPIC -O2 -o shim.so shim.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

enum {
    OP_OPEN = 1,        /* fd, arg = flags, path1 */
    OP_WRITE_BEGIN = 2, /* fd, id */
    OP_WRITE_END = 3,   /* fd, id, off, len, data; arg = result */
    OP_TRUNCATE = 4,    /* fd, len = new length */
    OP_SYNC_BEGIN = 5,  /* fd (-1: whole system), id, arg = kind */
    OP_SYNC_END = 6,    /* fd, id, arg = result */
    OP_RANGE = 7,       /* sync_file_range: fd, off, len (not a barrier) */
    OP_RENAME = 8,      /* path1 -> path2 */
    OP_UNLINK = 9,      /* path1 */
    OP_MKDIR = 10,      /* path1 */
    OP_RMDIR = 11,      /* path1 */
    OP_CLOSE = 12,      /* fd */
    OP_MARK = 13,       /* data */
    OP_FALLOCATE = 14,  /* fd, off, len, arg = mode */
    OP_DUP = 15,        /* fd = new, arg = old */
    OP_UNSUPPORTED = 16, /* path1 = what */
    OP_INTENT = 17       /* a name change or truncation is about to be made */
};

enum { SYNC_FSYNC = 1, SYNC_FDATASYNC = 2, SYNC_ALL = 3 };

#define MAX_FD 65536
/* Descriptor kinds (0: not ours). */
enum { K_TRACKED = 1, K_DSYNC = 2, K_MARK = 4 };

static int fd_kind[MAX_FD];
static char *fd_path[MAX_FD];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int log_fd = -1;
static char *root;
static size_t root_len;
static char *mark_path;
static uint64_t next_id = 1;
/* Writes between their BEGIN and END; a truncation or allocation waits for
 * none to be in flight (see "Ordering"). */
static int writes_in_flight;
static pthread_cond_t no_writes = PTHREAD_COND_INITIALIZER;

#define REAL(ret, name, args)                                                 \
    static ret(*real_##name) args;                                            \
    static void load_##name(void) {                                           \
        if (!real_##name) real_##name = (ret(*) args)dlsym(RTLD_NEXT, #name); \
    }

REAL(int, open, (const char *, int, ...))
REAL(int, open64, (const char *, int, ...))
REAL(int, openat, (int, const char *, int, ...))
REAL(int, openat64, (int, const char *, int, ...))
REAL(int, creat, (const char *, mode_t))
REAL(int, creat64, (const char *, mode_t))
REAL(ssize_t, write, (int, const void *, size_t))
REAL(ssize_t, pwrite, (int, const void *, size_t, off_t))
REAL(ssize_t, pwrite64, (int, const void *, size_t, off64_t))
REAL(ssize_t, writev, (int, const struct iovec *, int))
REAL(ssize_t, pwritev, (int, const struct iovec *, int, off_t))
REAL(ssize_t, pwritev64, (int, const struct iovec *, int, off64_t))
REAL(ssize_t, pwritev2, (int, const struct iovec *, int, off_t, int))
REAL(ssize_t, pwritev64v2, (int, const struct iovec *, int, off64_t, int))
REAL(int, ftruncate, (int, off_t))
REAL(int, ftruncate64, (int, off64_t))
REAL(int, truncate, (const char *, off_t))
REAL(int, truncate64, (const char *, off64_t))
REAL(int, fallocate, (int, int, off_t, off_t))
REAL(int, fallocate64, (int, int, off64_t, off64_t))
REAL(int, posix_fallocate, (int, off_t, off_t))
REAL(int, posix_fallocate64, (int, off64_t, off64_t))
REAL(int, fsync, (int))
REAL(int, fdatasync, (int))
REAL(int, syncfs, (int))
REAL(void, sync, (void))
REAL(int, sync_file_range, (int, off64_t, off64_t, unsigned int))
REAL(int, rename, (const char *, const char *))
REAL(int, renameat, (int, const char *, int, const char *))
REAL(int, renameat2, (int, const char *, int, const char *, unsigned int))
REAL(int, unlink, (const char *))
REAL(int, unlinkat, (int, const char *, int))
REAL(int, remove, (const char *))
REAL(int, mkdir, (const char *, mode_t))
REAL(int, mkdirat, (int, const char *, mode_t))
REAL(int, rmdir, (const char *))
REAL(int, link, (const char *, const char *))
REAL(int, linkat, (int, const char *, int, const char *, int))
REAL(int, symlink, (const char *, const char *))
REAL(int, symlinkat, (const char *, int, const char *))
REAL(int, close, (int))
REAL(int, dup, (int))
REAL(int, dup2, (int, int))
REAL(int, dup3, (int, int, int))
REAL(int, fcntl, (int, int, ...))
REAL(int, fcntl64, (int, int, ...))
REAL(void *, mmap, (void *, size_t, int, int, int, off_t))
REAL(void *, mmap64, (void *, size_t, int, int, int, off64_t))
REAL(ssize_t, copy_file_range, (int, off64_t *, int, off64_t *, size_t, unsigned int))
REAL(ssize_t, sendfile, (int, int, off_t *, size_t))
REAL(ssize_t, sendfile64, (int, int, off64_t *, size_t))
REAL(ssize_t, splice, (int, off64_t *, int, off64_t *, size_t, unsigned int))
REAL(off64_t, lseek64, (int, off64_t, int))

static int active(void) { return log_fd >= 0; }

static int kind_of(int fd) {
    if (fd < 0 || fd >= MAX_FD || !active()) return 0;
    return __atomic_load_n(&fd_kind[fd], __ATOMIC_ACQUIRE);
}

/* Writes one whole record to the log; called with `mu` held. */
static void emit(int op, int fd, int arg, uint64_t id, uint64_t off, uint64_t len,
                 const char *p1, const char *p2, const struct iovec *data, int ndata) {
    struct {
        uint32_t magic;
        uint8_t op, pad[3];
        int32_t fd, arg;
        uint64_t id, off, len;
        uint32_t p1, p2;
    } __attribute__((packed)) h;
    struct iovec iov[3 + 1024];
    int n = 0, i;
    memset(&h, 0, sizeof h);
    h.magic = 0x31524c50; /* "PLR1" */
    h.op = (uint8_t)op;
    h.fd = fd;
    h.arg = arg;
    h.id = id;
    h.off = off;
    h.len = len;
    h.p1 = p1 ? (uint32_t)strlen(p1) : 0;
    h.p2 = p2 ? (uint32_t)strlen(p2) : 0;
    iov[n].iov_base = &h;
    iov[n++].iov_len = sizeof h;
    if (h.p1) { iov[n].iov_base = (void *)p1; iov[n++].iov_len = h.p1; }
    if (h.p2) { iov[n].iov_base = (void *)p2; iov[n++].iov_len = h.p2; }
    /* `len` bytes of data, taken from the iovecs in order. */
    uint64_t left = (op == OP_WRITE_END || op == OP_MARK) ? len : 0;
    for (i = 0; i < ndata && left > 0 && n < (int)(sizeof iov / sizeof iov[0]); i++) {
        size_t take = data[i].iov_len < left ? data[i].iov_len : (size_t)left;
        if (take == 0) continue;
        iov[n].iov_base = data[i].iov_base;
        iov[n++].iov_len = take;
        left -= take;
    }
    if (left > 0) abort(); /* more iovecs than one record takes: never in practice */
    load_writev();
    /* Write it all; a short write goes on where it stopped. */
    struct iovec *v = iov;
    while (n > 0) {
        ssize_t w = real_writev(log_fd, v, n > IOV_MAX ? IOV_MAX : n);
        if (w < 0) {
            if (errno == EINTR) continue;
            abort(); /* a log that misses records would make false states */
        }
        while (n > 0 && (size_t)w >= v->iov_len) {
            w -= (ssize_t)v->iov_len;
            v++;
            n--;
        }
        if (n > 0) {
            v->iov_base = (char *)v->iov_base + w;
            v->iov_len -= (size_t)w;
        }
    }
}

static void emit_simple(int op, int fd, int arg, uint64_t id, uint64_t off, uint64_t len,
                        const char *p1, const char *p2) {
    emit(op, fd, arg, id, off, len, p1, p2, NULL, 0);
}

/* The absolute path of `path` relative to `dirfd`, if it is under the root
 * directory (or is the mark file); NULL otherwise. The caller frees it. */
static char *resolve(int dirfd, const char *path, int *is_mark) {
    char *full;
    *is_mark = 0;
    if (!active() || !path) return NULL;
    if (path[0] == '/') {
        full = strdup(path);
    } else {
        const char *base;
        char cwd[PATH_MAX];
        if (dirfd == AT_FDCWD) {
            if (!getcwd(cwd, sizeof cwd)) return NULL;
            base = cwd;
        } else if (dirfd >= 0 && dirfd < MAX_FD && fd_path[dirfd]) {
            base = fd_path[dirfd];
        } else {
            return NULL;
        }
        full = malloc(strlen(base) + strlen(path) + 2);
        if (!full) return NULL;
        sprintf(full, "%s/%s", base, path);
    }
    if (!full) return NULL;
    /* Strip trailing slashes (not the root's own). */
    size_t l = strlen(full);
    while (l > 1 && full[l - 1] == '/') full[--l] = 0;
    if (mark_path && strcmp(full, mark_path) == 0) {
        *is_mark = 1;
        return full;
    }
    if (strncmp(full, root, root_len) == 0 && (full[root_len] == 0 || full[root_len] == '/'))
        return full;
    free(full);
    return NULL;
}

/* Sets the kind and path of `fd`; called with `mu` held. Takes `path`. */
static void track(int fd, int kind, char *path) {
    if (fd < 0 || fd >= MAX_FD) {
        free(path);
        return;
    }
    free(fd_path[fd]);
    fd_path[fd] = path;
    __atomic_store_n(&fd_kind[fd], kind, __ATOMIC_RELEASE);
}

static void untrack(int fd) {
    if (fd < 0 || fd >= MAX_FD) return;
    __atomic_store_n(&fd_kind[fd], 0, __ATOMIC_RELEASE);
    free(fd_path[fd]);
    fd_path[fd] = NULL;
}

__attribute__((constructor)) static void init(void) {
    const char *dir = getenv("AJ_PL_DIR");
    const char *log = getenv("AJ_PL_LOG");
    const char *mark = getenv("AJ_PL_MARK");
    if (!dir || !log || dir[0] != '/') return;
    root = strdup(dir);
    root_len = strlen(root);
    while (root_len > 1 && root[root_len - 1] == '/') root[--root_len] = 0;
    if (mark && mark[0] == '/') mark_path = strdup(mark);
    load_open();
    log_fd = real_open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) {
        perror("powerloss shim: opening AJ_PL_LOG");
        abort();
    }
}

/* ---------------------------------------------------------------- opens */

static int after_open(int fd, char *path, int is_mark, int flags) {
    if (fd >= 0) {
        if (is_mark) {
            track(fd, K_MARK, path);
        } else {
            emit_simple(OP_OPEN, fd, flags, 0, 0, 0, path, NULL);
            track(fd, K_TRACKED | ((flags & (O_DSYNC | O_SYNC)) ? K_DSYNC : 0), path);
        }
    } else {
        free(path);
    }
    return fd;
}

static int needs_mode(int flags) {
    return (flags & O_CREAT) || ((flags & O_TMPFILE) == O_TMPFILE);
}

#define OPEN_BODY(call_untracked, call_tracked, dirfd)                        \
    int is_mark;                                                              \
    char *p = resolve(dirfd, path, &is_mark);                                 \
    if (!p) return call_untracked;                                            \
    pthread_mutex_lock(&mu);                                                  \
    if (!is_mark) emit_simple(OP_INTENT, -1, 0, 0, 0, 0, NULL, NULL);         \
    int fd = call_tracked;                                                    \
    int saved = errno;                                                        \
    if (fd >= 0 && (flags & O_TMPFILE) == O_TMPFILE && !is_mark)              \
        emit_simple(OP_UNSUPPORTED, fd, flags, 0, 0, 0, "O_TMPFILE", p);      \
    after_open(fd, p, is_mark, flags);                                        \
    pthread_mutex_unlock(&mu);                                                \
    errno = saved;                                                            \
    return fd;

int open(const char *path, int flags, ...) {
    mode_t mode = 0;
    if (needs_mode(flags)) {
        va_list ap;
        va_start(ap, flags);
        mode = va_arg(ap, mode_t);
        va_end(ap);
    }
    load_open();
    OPEN_BODY(real_open(path, flags, mode), real_open(path, flags, mode), AT_FDCWD)
}

int open64(const char *path, int flags, ...) {
    mode_t mode = 0;
    if (needs_mode(flags)) {
        va_list ap;
        va_start(ap, flags);
        mode = va_arg(ap, mode_t);
        va_end(ap);
    }
    load_open64();
    OPEN_BODY(real_open64(path, flags, mode), real_open64(path, flags, mode), AT_FDCWD)
}

int openat(int dirfd, const char *path, int flags, ...) {
    mode_t mode = 0;
    if (needs_mode(flags)) {
        va_list ap;
        va_start(ap, flags);
        mode = va_arg(ap, mode_t);
        va_end(ap);
    }
    load_openat();
    OPEN_BODY(real_openat(dirfd, path, flags, mode), real_openat(dirfd, path, flags, mode),
              dirfd)
}

int openat64(int dirfd, const char *path, int flags, ...) {
    mode_t mode = 0;
    if (needs_mode(flags)) {
        va_list ap;
        va_start(ap, flags);
        mode = va_arg(ap, mode_t);
        va_end(ap);
    }
    load_openat64();
    OPEN_BODY(real_openat64(dirfd, path, flags, mode),
              real_openat64(dirfd, path, flags, mode), dirfd)
}

int creat(const char *path, mode_t mode) {
    int flags = O_CREAT | O_WRONLY | O_TRUNC;
    load_creat();
    OPEN_BODY(real_creat(path, mode), real_creat(path, mode), AT_FDCWD)
}

int creat64(const char *path, mode_t mode) {
    int flags = O_CREAT | O_WRONLY | O_TRUNC;
    load_creat64();
    OPEN_BODY(real_creat64(path, mode), real_creat64(path, mode), AT_FDCWD)
}

/* --------------------------------------------------------------- writes */

static uint64_t write_begin(int fd) {
    pthread_mutex_lock(&mu);
    uint64_t id = next_id++;
    writes_in_flight++;
    emit_simple(OP_WRITE_BEGIN, fd, 0, id, 0, 0, NULL, NULL);
    pthread_mutex_unlock(&mu);
    return id;
}

/* Logs the END of a write of `ret` bytes at `off` (-1: at the position the
 * descriptor had, found from where it is now). */
static void write_end(int fd, uint64_t id, ssize_t ret, int64_t off, const struct iovec *iov,
                      int n) {
    int saved = errno;
    pthread_mutex_lock(&mu);
    if (ret > 0 && off < 0) {
        load_lseek64();
        off = real_lseek64(fd, 0, SEEK_CUR) - ret;
    }
    emit(OP_WRITE_END, fd, ret < 0 ? -1 : 0, id, ret > 0 ? (uint64_t)off : 0,
         ret > 0 ? (uint64_t)ret : 0, NULL, NULL, iov, n);
    if (--writes_in_flight == 0) pthread_cond_broadcast(&no_writes);
    pthread_mutex_unlock(&mu);
    errno = saved;
}

static void mark(const struct iovec *iov, int n, ssize_t ret) {
    if (ret <= 0) return;
    int saved = errno;
    pthread_mutex_lock(&mu);
    emit(OP_MARK, -1, 0, 0, 0, (uint64_t)ret, NULL, NULL, iov, n);
    pthread_mutex_unlock(&mu);
    errno = saved;
}

#define WRITE_BODY(call, off, iov, n)                 \
    int k = kind_of(fd);                              \
    if (!k) return call;                              \
    if (k & K_MARK) {                                 \
        ssize_t r = call;                             \
        mark(iov, n, r);                              \
        return r;                                     \
    }                                                 \
    uint64_t id = write_begin(fd);                    \
    ssize_t r = call;                                 \
    write_end(fd, id, r, off, iov, n);                \
    return r;

ssize_t write(int fd, const void *buf, size_t count) {
    struct iovec one = {(void *)buf, count};
    load_write();
    WRITE_BODY(real_write(fd, buf, count), -1, &one, 1)
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t off) {
    struct iovec one = {(void *)buf, count};
    load_pwrite();
    WRITE_BODY(real_pwrite(fd, buf, count, off), (int64_t)off, &one, 1)
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off64_t off) {
    struct iovec one = {(void *)buf, count};
    load_pwrite64();
    WRITE_BODY(real_pwrite64(fd, buf, count, off), (int64_t)off, &one, 1)
}

ssize_t writev(int fd, const struct iovec *iov, int n) {
    load_writev();
    WRITE_BODY(real_writev(fd, iov, n), -1, iov, n)
}

ssize_t pwritev(int fd, const struct iovec *iov, int n, off_t off) {
    load_pwritev();
    WRITE_BODY(real_pwritev(fd, iov, n, off), (int64_t)off, iov, n)
}

ssize_t pwritev64(int fd, const struct iovec *iov, int n, off64_t off) {
    load_pwritev64();
    WRITE_BODY(real_pwritev64(fd, iov, n, off), (int64_t)off, iov, n)
}

ssize_t pwritev2(int fd, const struct iovec *iov, int n, off_t off, int flags) {
    load_pwritev2();
    /* RWF_DSYNC/RWF_SYNC would make this one write synced: not modelled. */
    if (kind_of(fd) & K_TRACKED && flags) {
        pthread_mutex_lock(&mu);
        emit_simple(OP_UNSUPPORTED, fd, flags, 0, 0, 0, "pwritev2 flags", NULL);
        pthread_mutex_unlock(&mu);
    }
    WRITE_BODY(real_pwritev2(fd, iov, n, off, flags), off == -1 ? -1 : (int64_t)off, iov, n)
}

ssize_t pwritev64v2(int fd, const struct iovec *iov, int n, off64_t off, int flags) {
    load_pwritev64v2();
    if (kind_of(fd) & K_TRACKED && flags) {
        pthread_mutex_lock(&mu);
        emit_simple(OP_UNSUPPORTED, fd, flags, 0, 0, 0, "pwritev2 flags", NULL);
        pthread_mutex_unlock(&mu);
    }
    WRITE_BODY(real_pwritev64v2(fd, iov, n, off, flags), off == -1 ? -1 : (int64_t)off, iov,
               n)
}

/* ------------------------------------------------- truncate and allocate */

#define LOCKED_FD_OP(call, op, arg, off, len)                         \
    if (!(kind_of(fd) & K_TRACKED)) return call;                      \
    pthread_mutex_lock(&mu);                                          \
    while (writes_in_flight > 0) pthread_cond_wait(&no_writes, &mu);  \
    emit_simple(OP_INTENT, -1, 0, 0, 0, 0, NULL, NULL);               \
    int r = call;                                                     \
    int saved = errno;                                                \
    if (r == 0) emit_simple(op, fd, arg, 0, off, len, NULL, NULL);    \
    pthread_mutex_unlock(&mu);                                        \
    errno = saved;                                                    \
    return r;

int ftruncate(int fd, off_t len) {
    load_ftruncate();
    LOCKED_FD_OP(real_ftruncate(fd, len), OP_TRUNCATE, 0, 0, (uint64_t)len)
}

int ftruncate64(int fd, off64_t len) {
    load_ftruncate64();
    LOCKED_FD_OP(real_ftruncate64(fd, len), OP_TRUNCATE, 0, 0, (uint64_t)len)
}

int fallocate(int fd, int mode, off_t off, off_t len) {
    load_fallocate();
    LOCKED_FD_OP(real_fallocate(fd, mode, off, len), OP_FALLOCATE, mode, (uint64_t)off,
                 (uint64_t)len)
}

int fallocate64(int fd, int mode, off64_t off, off64_t len) {
    load_fallocate64();
    LOCKED_FD_OP(real_fallocate64(fd, mode, off, len), OP_FALLOCATE, mode, (uint64_t)off,
                 (uint64_t)len)
}

int posix_fallocate(int fd, off_t off, off_t len) {
    load_posix_fallocate();
    LOCKED_FD_OP(real_posix_fallocate(fd, off, len), OP_FALLOCATE, 0, (uint64_t)off,
                 (uint64_t)len)
}

int posix_fallocate64(int fd, off64_t off, off64_t len) {
    load_posix_fallocate64();
    LOCKED_FD_OP(real_posix_fallocate64(fd, off, len), OP_FALLOCATE, 0, (uint64_t)off,
                 (uint64_t)len)
}

/* A path-based truncate: not used by the journal; recorded as unsupported. */
static void unsupported_path(const char *what, const char *path) {
    int is_mark;
    char *p = resolve(AT_FDCWD, path, &is_mark);
    if (!p) return;
    pthread_mutex_lock(&mu);
    emit_simple(OP_UNSUPPORTED, -1, 0, 0, 0, 0, what, p);
    pthread_mutex_unlock(&mu);
    free(p);
}

int truncate(const char *path, off_t len) {
    load_truncate();
    unsupported_path("truncate", path);
    return real_truncate(path, len);
}

int truncate64(const char *path, off64_t len) {
    load_truncate64();
    unsupported_path("truncate", path);
    return real_truncate64(path, len);
}

/* ---------------------------------------------------------------- syncs */

#define SYNC_BODY(call, kind)                                              \
    if (!(kind_of(fd) & K_TRACKED)) return call;                           \
    pthread_mutex_lock(&mu);                                               \
    uint64_t id = next_id++;                                               \
    emit_simple(OP_SYNC_BEGIN, fd, kind, id, 0, 0, NULL, NULL);            \
    pthread_mutex_unlock(&mu);                                             \
    int r = call;                                                          \
    int saved = errno;                                                     \
    pthread_mutex_lock(&mu);                                               \
    emit_simple(OP_SYNC_END, fd, r, id, 0, 0, NULL, NULL);                 \
    pthread_mutex_unlock(&mu);                                             \
    errno = saved;                                                         \
    return r;

int fsync(int fd) {
    load_fsync();
    SYNC_BODY(real_fsync(fd), SYNC_FSYNC)
}

int fdatasync(int fd) {
    load_fdatasync();
    SYNC_BODY(real_fdatasync(fd), SYNC_FDATASYNC)
}

static int syncfs_all(int fd) {
    load_syncfs();
    return real_syncfs(fd);
}

int syncfs(int fd) {
    if (!active()) return syncfs_all(fd);
    pthread_mutex_lock(&mu);
    uint64_t id = next_id++;
    emit_simple(OP_SYNC_BEGIN, -1, SYNC_ALL, id, 0, 0, NULL, NULL);
    pthread_mutex_unlock(&mu);
    int r = syncfs_all(fd);
    int saved = errno;
    pthread_mutex_lock(&mu);
    emit_simple(OP_SYNC_END, -1, r, id, 0, 0, NULL, NULL);
    pthread_mutex_unlock(&mu);
    errno = saved;
    return r;
}

void sync(void) {
    load_sync();
    if (!active()) {
        real_sync();
        return;
    }
    pthread_mutex_lock(&mu);
    uint64_t id = next_id++;
    emit_simple(OP_SYNC_BEGIN, -1, SYNC_ALL, id, 0, 0, NULL, NULL);
    pthread_mutex_unlock(&mu);
    real_sync();
    pthread_mutex_lock(&mu);
    emit_simple(OP_SYNC_END, -1, 0, id, 0, 0, NULL, NULL);
    pthread_mutex_unlock(&mu);
}

/* Starts or waits for writeback of a range: no promise across a power cut
 * (no device cache flush, no metadata), so it is logged and not modelled. */
int sync_file_range(int fd, off64_t off, off64_t len, unsigned int flags) {
    load_sync_file_range();
    if (!(kind_of(fd) & K_TRACKED)) return real_sync_file_range(fd, off, len, flags);
    int r = real_sync_file_range(fd, off, len, flags);
    int saved = errno;
    pthread_mutex_lock(&mu);
    emit_simple(OP_RANGE, fd, (int)flags, 0, (uint64_t)off, (uint64_t)len, NULL, NULL);
    pthread_mutex_unlock(&mu);
    errno = saved;
    return r;
}

/* ---------------------------------------------------------------- names */

#define NAME_OP(call, op, p1, p2)                                  \
    pthread_mutex_lock(&mu);                                       \
    emit_simple(OP_INTENT, -1, 0, 0, 0, 0, NULL, NULL);            \
    int r = call;                                                  \
    int saved = errno;                                             \
    if (r == 0) emit_simple(op, -1, 0, 0, 0, 0, p1, p2);           \
    pthread_mutex_unlock(&mu);                                     \
    errno = saved;

static int rename_common(int olddir, const char *oldp, int newdir, const char *newp,
                         unsigned int flags, int use_at, int use2) {
    int m1, m2;
    char *a = resolve(olddir, oldp, &m1);
    char *b = resolve(newdir, newp, &m2);
    load_rename();
    load_renameat();
    load_renameat2();
#define DO_RENAME                                                          \
    (use2 ? real_renameat2(olddir, oldp, newdir, newp, flags)              \
          : use_at ? real_renameat(olddir, oldp, newdir, newp)             \
                   : real_rename(oldp, newp))
    if (!a && !b) return DO_RENAME;
    if (!a || !b || flags) {
        /* Into or out of the directory, or an exchange: not modelled. */
        int r = DO_RENAME;
        int saved = errno;
        pthread_mutex_lock(&mu);
        if (r == 0)
            emit_simple(OP_UNSUPPORTED, -1, (int)flags, 0, 0, 0, "rename in or out", a ? a : b);
        pthread_mutex_unlock(&mu);
        free(a);
        free(b);
        errno = saved;
        return r;
    }
    NAME_OP(DO_RENAME, OP_RENAME, a, b)
    free(a);
    free(b);
    errno = saved;
    return r;
#undef DO_RENAME
}

int rename(const char *a, const char *b) { return rename_common(AT_FDCWD, a, AT_FDCWD, b, 0, 0, 0); }

int renameat(int da, const char *a, int db, const char *b) {
    return rename_common(da, a, db, b, 0, 1, 0);
}

int renameat2(int da, const char *a, int db, const char *b, unsigned int flags) {
    return rename_common(da, a, db, b, flags, 1, 1);
}

int unlink(const char *path) {
    int m;
    load_unlink();
    char *p = resolve(AT_FDCWD, path, &m);
    if (!p || m) {
        free(p);
        return real_unlink(path);
    }
    NAME_OP(real_unlink(path), OP_UNLINK, p, NULL)
    free(p);
    errno = saved;
    return r;
}

int unlinkat(int dirfd, const char *path, int flags) {
    int m;
    load_unlinkat();
    char *p = resolve(dirfd, path, &m);
    if (!p || m) {
        free(p);
        return real_unlinkat(dirfd, path, flags);
    }
    NAME_OP(real_unlinkat(dirfd, path, flags), (flags & AT_REMOVEDIR) ? OP_RMDIR : OP_UNLINK, p,
            NULL)
    free(p);
    errno = saved;
    return r;
}

int remove(const char *path) {
    int m;
    load_remove();
    char *p = resolve(AT_FDCWD, path, &m);
    if (!p || m) {
        free(p);
        return real_remove(path);
    }
    struct stat st;
    int dir = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
    NAME_OP(real_remove(path), dir ? OP_RMDIR : OP_UNLINK, p, NULL)
    free(p);
    errno = saved;
    return r;
}

int mkdir(const char *path, mode_t mode) {
    int m;
    load_mkdir();
    char *p = resolve(AT_FDCWD, path, &m);
    if (!p) return real_mkdir(path, mode);
    NAME_OP(real_mkdir(path, mode), OP_MKDIR, p, NULL)
    free(p);
    errno = saved;
    return r;
}

int mkdirat(int dirfd, const char *path, mode_t mode) {
    int m;
    load_mkdirat();
    char *p = resolve(dirfd, path, &m);
    if (!p) return real_mkdirat(dirfd, path, mode);
    NAME_OP(real_mkdirat(dirfd, path, mode), OP_MKDIR, p, NULL)
    free(p);
    errno = saved;
    return r;
}

int rmdir(const char *path) {
    int m;
    load_rmdir();
    char *p = resolve(AT_FDCWD, path, &m);
    if (!p) return real_rmdir(path);
    NAME_OP(real_rmdir(path), OP_RMDIR, p, NULL)
    free(p);
    errno = saved;
    return r;
}

/* Hard and symbolic links: not used by the journal; recorded as unsupported. */
int link(const char *a, const char *b) {
    load_link();
    unsupported_path("link", b);
    return real_link(a, b);
}

int linkat(int da, const char *a, int db, const char *b, int flags) {
    load_linkat();
    if (db == AT_FDCWD) unsupported_path("link", b);
    return real_linkat(da, a, db, b, flags);
}

int symlink(const char *a, const char *b) {
    load_symlink();
    unsupported_path("symlink", b);
    return real_symlink(a, b);
}

int symlinkat(const char *a, int db, const char *b) {
    load_symlinkat();
    if (db == AT_FDCWD) unsupported_path("symlink", b);
    return real_symlinkat(a, db, b);
}

/* ------------------------------------------------- descriptors' lifetime */

int close(int fd) {
    load_close();
    if (!kind_of(fd)) return real_close(fd);
    /* Forget it before the number can be handed out again. */
    pthread_mutex_lock(&mu);
    if (fd_kind[fd] & K_TRACKED) emit_simple(OP_CLOSE, fd, 0, 0, 0, 0, NULL, NULL);
    untrack(fd);
    int r = real_close(fd);
    int saved = errno;
    pthread_mutex_unlock(&mu);
    errno = saved;
    return r;
}

/* Called with `mu` held: `newfd` now refers to what `old` refers to. */
static void duplicated(int old, int newfd) {
    if (newfd < 0 || newfd >= MAX_FD || newfd == old) return;
    if (fd_kind[newfd] & K_TRACKED) emit_simple(OP_CLOSE, newfd, 0, 0, 0, 0, NULL, NULL);
    untrack(newfd);
    if (old >= 0 && old < MAX_FD && fd_kind[old]) {
        if (fd_kind[old] & K_TRACKED) emit_simple(OP_DUP, newfd, old, 0, 0, 0, NULL, NULL);
        track(newfd, fd_kind[old], fd_path[old] ? strdup(fd_path[old]) : NULL);
    }
}

int dup(int old) {
    load_dup();
    if (!active()) return real_dup(old);
    pthread_mutex_lock(&mu);
    int r = real_dup(old);
    int saved = errno;
    if (r >= 0) duplicated(old, r);
    pthread_mutex_unlock(&mu);
    errno = saved;
    return r;
}

int dup2(int old, int newfd) {
    load_dup2();
    if (!active()) return real_dup2(old, newfd);
    pthread_mutex_lock(&mu);
    int r = real_dup2(old, newfd);
    int saved = errno;
    if (r >= 0) duplicated(old, r);
    pthread_mutex_unlock(&mu);
    errno = saved;
    return r;
}

int dup3(int old, int newfd, int flags) {
    load_dup3();
    if (!active()) return real_dup3(old, newfd, flags);
    pthread_mutex_lock(&mu);
    int r = real_dup3(old, newfd, flags);
    int saved = errno;
    if (r >= 0) duplicated(old, r);
    pthread_mutex_unlock(&mu);
    errno = saved;
    return r;
}

static int fcntl_common(int (*real)(int, int, ...), int fd, int cmd, void *arg) {
    if (!active() || (cmd != F_DUPFD && cmd != F_DUPFD_CLOEXEC)) return real(fd, cmd, arg);
    pthread_mutex_lock(&mu);
    int r = real(fd, cmd, arg);
    int saved = errno;
    if (r >= 0) duplicated(fd, r);
    pthread_mutex_unlock(&mu);
    errno = saved;
    return r;
}

int fcntl(int fd, int cmd, ...) {
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    load_fcntl();
    return fcntl_common(real_fcntl, fd, cmd, arg);
}

int fcntl64(int fd, int cmd, ...) {
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    load_fcntl64();
    if (!real_fcntl64) {
        load_fcntl();
        return fcntl_common(real_fcntl, fd, cmd, arg);
    }
    return fcntl_common(real_fcntl64, fd, cmd, arg);
}

/* --------------------------------------- other write paths: not modelled */

static void unsupported_fd(int fd, const char *what) {
    if (!(kind_of(fd) & K_TRACKED)) return;
    pthread_mutex_lock(&mu);
    emit_simple(OP_UNSUPPORTED, fd, 0, 0, 0, 0, what, NULL);
    pthread_mutex_unlock(&mu);
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    load_mmap();
    if ((prot & PROT_WRITE) && (flags & MAP_SHARED)) unsupported_fd(fd, "shared writable mmap");
    return real_mmap(addr, len, prot, flags, fd, off);
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off) {
    load_mmap64();
    if ((prot & PROT_WRITE) && (flags & MAP_SHARED)) unsupported_fd(fd, "shared writable mmap");
    return real_mmap64(addr, len, prot, flags, fd, off);
}

ssize_t copy_file_range(int in, off64_t *oin, int out, off64_t *oout, size_t len,
                        unsigned int flags) {
    load_copy_file_range();
    unsupported_fd(out, "copy_file_range");
    return real_copy_file_range(in, oin, out, oout, len, flags);
}

ssize_t sendfile(int out, int in, off_t *off, size_t count) {
    load_sendfile();
    unsupported_fd(out, "sendfile");
    return real_sendfile(out, in, off, count);
}

ssize_t sendfile64(int out, int in, off64_t *off, size_t count) {
    load_sendfile64();
    unsupported_fd(out, "sendfile");
    return real_sendfile64(out, in, off, count);
}

ssize_t splice(int in, off64_t *oin, int out, off64_t *oout, size_t len, unsigned int flags) {
    load_splice();
    unsupported_fd(out, "splice");
    return real_splice(in, oin, out, oout, len, flags);
}
