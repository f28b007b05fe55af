/* Files that must survive a crash: writes flushed to disk, folders made
 * and flushed, checksums (io/checkpoint_folder.c, io/safetensors.c). Every
 * failure is BRG_ERR_IO with a message naming the path and the reason. */
#ifndef BRG_IO_FILES_H
#define BRG_IO_FILES_H

#include <stddef.h>
#include <stdint.h>

#include "brigade/status.h"

/* Create path's folder and any missing parents (mode 0777 less umask).
 * made: NULL, or strlen(path) + 1 bytes where made[k] is set to 1 for
 * each folder path's first k bytes name that this call created (and left
 * as it was for the others, so that calls add up), also where a "." or
 * ".." names one made ("new/x/." is "new/x"): exactly the folders to
 * remove to undo it, also past a ".." in path. */
brg_status brg_io_make_folders(const char *path, unsigned char *made);

/* Write bytes to path (created or truncated) and flush it to disk. Not
 * atomic by itself: write into a temporary folder or name, then rename. */
brg_status brg_io_write_synced(const char *path, const void *data, size_t bytes);

/* Replace path with bytes atomically: written and flushed as
 * path.tmp.PID, renamed over path, its folder flushed. */
brg_status brg_io_replace_synced(const char *path, const void *data, size_t bytes);

/* Flush a folder's entries (after a rename or a new file in it). */
brg_status brg_io_sync_folder(const char *path);

/* Remove the folder path (a checkpoint, a crashed save) and the files in
 * it, when it is a folder, not a link, and holds only regular files whose
 * names ours accepts; otherwise BRG_ERR_IO saying why, and nothing of it
 * is removed. */
brg_status brg_io_remove_folder_of(const char *path, int (*ours)(const char *name));

/* brg_file_checksum, the size and zlib CRC-32 of a file's contents, is
 * public: include/brigade/checkpoint.h. */

#endif
