/* Crash-safe file helpers (io/files.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "base/internal.h"
#include "brigade/checkpoint.h"
#include "files.h"

static brg_status io_error(const char *what, const char *path)
{
    return brg_error(BRG_ERR_IO, "%s %s: %s", what, path, strerror(errno));
}

/* Flush the folder holding path, so that a new entry there lasts. */
static brg_status sync_parent(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) return brg_io_sync_folder(".");
    if (slash == path) return brg_io_sync_folder("/");
    char *parent = brg_malloc((size_t)(slash - path) + 1, "a folder path");
    if (!parent) return BRG_ERR_HOST_MEMORY;
    memcpy(parent, path, (size_t)(slash - path));
    parent[slash - path] = '\0';
    const brg_status st = brg_io_sync_folder(parent);
    free(parent);
    return st;
}

/* Whether the folder sb names is one of those made marks in path's
 * prefixes shorter than k bytes ("new/." and "new/x/.." name a folder made
 * as "new"). */
static int made_already(const char *path, size_t k, const unsigned char *made, const struct stat *sb)
{
    char *prefix = brg_malloc(k + 1, "a folder path");
    int same = 0;
    for (size_t j = 1; prefix && j < k && !same; j++) {
        if (!made[j]) continue;
        struct stat there;
        memcpy(prefix, path, j);
        prefix[j] = '\0';
        same = stat(prefix, &there) == 0 && there.st_dev == sb->st_dev && there.st_ino == sb->st_ino;
    }
    free(prefix);
    return same;
}

brg_status brg_io_make_folders(const char *path, unsigned char *made)
{
    if (!path[0]) return brg_error(BRG_ERR_INVALID_ARGUMENT, "an empty folder path");
    char *p = brg_malloc(strlen(path) + 1, "a folder path");
    if (!p) return BRG_ERR_HOST_MEMORY;
    strcpy(p, path);
    brg_status st = BRG_OK;
    /* Each prefix ending before a '/', then the whole path. */
    for (char *c = p + 1;; c++) {
        const char keep = *c;
        if (keep != '/' && keep != '\0') continue;
        *c = '\0';
        struct stat sb;
        const int made_here = mkdir(p, 0777) == 0;
        if (!made_here && errno != EEXIST) st = io_error("cannot create the folder", p);
        else if (stat(p, &sb) != 0) st = io_error("cannot read", p);
        else if (!S_ISDIR(sb.st_mode)) st = brg_error(BRG_ERR_IO, "%s is not a folder", p);
        else if (made_here) st = sync_parent(p); /* so that the new folder lasts a crash */
        if (made && (made_here || (st == BRG_OK && made_already(path, (size_t)(c - p), made, &sb)))) made[c - p] = 1;
        *c = keep;
        if (st != BRG_OK || keep == '\0') break;
    }
    free(p);
    return st;
}

brg_status brg_io_write_synced(const char *path, const void *data, size_t bytes)
{
    const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) return io_error("cannot create", path);
    const unsigned char *at = data;
    size_t left = bytes;
    while (left > 0) {
        const ssize_t w = write(fd, at, left);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            brg_status st = io_error("cannot write", path);
            close(fd);
            return st;
        }
        at += w;
        left -= (size_t)w;
    }
    if (fsync(fd) != 0) {
        brg_status st = io_error("cannot flush", path);
        close(fd);
        return st;
    }
    if (close(fd) != 0) return io_error("cannot close", path);
    return BRG_OK;
}

brg_status brg_io_replace_synced(const char *path, const void *data, size_t bytes)
{
    const size_t plen = strlen(path);
    char *tmp = brg_malloc(plen + 32, "a file name");
    if (!tmp) return BRG_ERR_HOST_MEMORY;
    snprintf(tmp, plen + 32, "%s.tmp.%ld", path, (long)getpid());
    brg_status st = brg_io_write_synced(tmp, data, bytes);
    if (st == BRG_OK && rename(tmp, path) != 0) st = io_error("cannot rename a new file over", path);
    if (st != BRG_OK) (void)unlink(tmp);
    free(tmp);
    return st == BRG_OK ? sync_parent(path) : st; /* so that the rename lasts */
}

brg_status brg_io_sync_folder(const char *path)
{
    const int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return io_error("cannot open the folder", path);
    const int bad = fsync(fd) != 0 && errno != EINVAL; /* some file systems cannot flush folders */
    brg_status st = bad ? io_error("cannot flush the folder", path) : BRG_OK;
    close(fd);
    return st;
}

brg_status brg_io_remove_folder_of(const char *path, int (*ours)(const char *name))
{
    struct stat sb;
    if (lstat(path, &sb) != 0) return io_error("cannot read", path);
    if (!S_ISDIR(sb.st_mode))
        return brg_error(BRG_ERR_IO, "%s is not a folder (a link or a file in a checkpoint's place): left as it is",
                         path);
    /* Everything looked at before anything goes: a folder holding what
     * brigade did not write is left whole. */
    for (int pass = 0; pass < 2; pass++) {
        DIR *d = opendir(path);
        if (!d) return io_error("cannot open the folder", path);
        brg_status st = BRG_OK;
        const struct dirent *e;
        while (st == BRG_OK && (e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            char file[4096];
            if ((size_t)snprintf(file, sizeof file, "%s/%s", path, e->d_name) >= sizeof file)
                st = brg_error(BRG_ERR_IO, "a path in %s is too long", path);
            else if (pass == 0 && (!ours(e->d_name) || lstat(file, &sb) != 0 || !S_ISREG(sb.st_mode)))
                st = brg_error(BRG_ERR_IO, "%s holds %s, which brigade did not write there: left as it is", path,
                               e->d_name);
            else if (pass == 1 && unlink(file) != 0)
                st = io_error("cannot remove", file);
        }
        closedir(d);
        if (st != BRG_OK) return st;
    }
    if (rmdir(path) != 0) return io_error("cannot remove the folder", path);
    return BRG_OK;
}

brg_status brg_file_checksum(const char *path, uint64_t *bytes, uint32_t *crc)
{
    FILE *f = fopen(path, "rb");
    if (!f) return io_error("cannot open", path);
    unsigned char buf[1 << 16];
    uLong c = crc32(0L, Z_NULL, 0);
    uint64_t total = 0;
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0) {
        c = crc32(c, buf, (uInt)got);
        total += got;
    }
    const int failed = ferror(f);
    fclose(f);
    if (failed) return brg_error(BRG_ERR_IO, "cannot read %s", path);
    *bytes = total;
    *crc = (uint32_t)c;
    return BRG_OK;
}
