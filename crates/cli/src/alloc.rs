//! The binary's global allocator: mimalloc, asked the way its fast path
//! expects.
//!
//! The `mimalloc` crate's allocator passed every allocation to
//! `mi_malloc_aligned`, whatever its alignment. mimalloc 3 serves such a
//! call from its fast path only for a block of at most 1 KiB whose free
//! list happens to start aligned; a larger block (a request's boxed
//! futures, its notes, header maps, bodies) takes the generic aligned path,
//! which over-allocates by the alignment and marks the page as holding
//! interior pointers. At 44faeae that path ran 23 times per proxied chat
//! completion, 7k of its 163k instructions (`bench/gateway/prof.sh`,
//! callgrind: `mi_theap_malloc_zero_aligned_at_generic` and
//! `…_at_overalloc`). Every block `mi_malloc` returns is aligned to
//! mimalloc's `MI_MAX_ALIGN_SIZE` (16 bytes) when it is at least that
//! large, and to its own size below (blocks are whole words, rounded to
//! two), so a layout whose alignment is at most 16 and at most its size
//! goes to the plain calls; only the rest (over-aligned types: tokio's
//! task cells, cache-padded counters) to the aligned ones.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

use libmimalloc_sys as mi;

/// The alignment of every block of at least this many bytes that
/// `mi_malloc` returns (mimalloc's `MI_MAX_ALIGN_SIZE`).
const MIN_ALIGN: usize = 16;

/// Whether a plain `mi_malloc` of `size` bytes is aligned to `align`.
fn plain(align: usize, size: usize) -> bool {
    align <= MIN_ALIGN && align <= size
}

/// mimalloc, with plain calls where they give the alignment asked for.
#[derive(Debug)]
pub struct Mimalloc;

/// A block for `layout` from `plain(size)` where a plain block is aligned
/// as asked, else from `aligned(size, align)`.
///
/// # Safety
/// Both must be mimalloc's allocation calls of those shapes.
#[inline]
unsafe fn block(
    layout: Layout,
    plain_call: unsafe extern "C" fn(usize) -> *mut c_void,
    aligned_call: unsafe extern "C" fn(usize, usize) -> *mut c_void,
) -> *mut u8 {
    // SAFETY: plain FFI calls; mimalloc accepts any size and a
    // power-of-two alignment, which `Layout` guarantees.
    unsafe {
        if plain(layout.align(), layout.size()) {
            plain_call(layout.size()).cast()
        } else {
            aligned_call(layout.size(), layout.align()).cast()
        }
    }
}

// SAFETY: every pointer returned comes from mimalloc for a block of at
// least `layout.size()` bytes aligned to `layout.align()` (`plain`, as
// above, or mimalloc's aligned calls), or is null on failure; every
// pointer freed or grown is one of those (the `GlobalAlloc` contract),
// and mimalloc frees and grows its blocks whichever call made them.
unsafe impl GlobalAlloc for Mimalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: mimalloc's allocation calls.
        unsafe { block(layout, mi::mi_malloc, mi::mi_malloc_aligned) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: mimalloc's zeroing allocation calls.
        unsafe { block(layout, mi::mi_zalloc, mi::mi_zalloc_aligned) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from one of the calls above (the caller's
        // contract); `mi_free` takes a block of any of them.
        unsafe { mi::mi_free(ptr.cast::<c_void>()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from one of the calls above with `layout`
        // (the caller's contract). `mi_realloc` keeps the block where it
        // fits, already aligned as `layout` asked, or moves it to a plain
        // block of `new_size`, aligned as `plain` says.
        unsafe {
            if plain(layout.align(), new_size) {
                mi::mi_realloc(ptr.cast::<c_void>(), new_size).cast()
            } else {
                mi::mi_realloc_aligned(ptr.cast::<c_void>(), new_size, layout.align()).cast()
            }
        }
    }
}

unsafe extern "C" {
    // mimalloc's, in the library libmimalloc-sys builds (that crate
    // declares them only with its `extended` feature).
    fn mi_usable_size(p: *const c_void) -> usize;
    #[cfg(test)]
    fn mi_is_in_heap_region(p: *const c_void) -> bool;
}

/// Points SQLite's own allocations (the bundled SQLite of sqlx and
/// rusqlite) at mimalloc as well; they went to glibc's malloc. The job
/// store's burn-down spent 8 % of its CPU there, on the connections'
/// threads (`malloc`, `_int_malloc`, `malloc_consolidate`, and frees of
/// the values sqlx copies out of each row, made on another thread than
/// their allocation: docs/jobs.md). Must run before SQLite is first used
/// (`sqlite3_initialize`); returns whether SQLite took it (it refuses once
/// initialized, and keeps its allocator then).
pub fn sqlite_on_mimalloc() -> bool {
    use libsqlite3_sys as sq;
    use std::ffi::c_int;

    /// SQLite asks for sizes that fit an `int`, and never for less than 1.
    fn size(n: c_int) -> usize {
        usize::try_from(n).unwrap_or(0)
    }
    unsafe extern "C" fn malloc(n: c_int) -> *mut c_void {
        // SAFETY: a plain allocation; 16-byte aligned (SQLite needs 8).
        unsafe { mi::mi_malloc(size(n)) }
    }
    unsafe extern "C" fn free(p: *mut c_void) {
        // SAFETY: SQLite frees only what `malloc` or `realloc` returned.
        unsafe { mi::mi_free(p) }
    }
    unsafe extern "C" fn realloc(p: *mut c_void, n: c_int) -> *mut c_void {
        // SAFETY: as `free`.
        unsafe { mi::mi_realloc(p, size(n)) }
    }
    unsafe extern "C" fn block_size(p: *mut c_void) -> c_int {
        // SAFETY: as `free`; a block SQLite asked for is under 2 GiB.
        c_int::try_from(unsafe { mi_usable_size(p) }).unwrap_or(c_int::MAX)
    }
    unsafe extern "C" fn roundup(n: c_int) -> c_int {
        // What SQLite's own glue to the system's malloc does: 8 bytes.
        n.saturating_add(7) & !7
    }
    unsafe extern "C" fn init(_: *mut c_void) -> c_int {
        sq::SQLITE_OK
    }
    unsafe extern "C" fn shutdown(_: *mut c_void) {}

    let methods = sq::sqlite3_mem_methods {
        xMalloc: Some(malloc),
        xFree: Some(free),
        xRealloc: Some(realloc),
        xSize: Some(block_size),
        xRoundup: Some(roundup),
        xInit: Some(init),
        xShutdown: Some(shutdown),
        pAppData: std::ptr::null_mut(),
    };
    // SAFETY: SQLITE_CONFIG_MALLOC takes a pointer to the methods and
    // copies them; each keeps SQLite's contract (above).
    let rc = unsafe { sq::sqlite3_config(sq::SQLITE_CONFIG_MALLOC, &raw const methods) };
    rc == sq::SQLITE_OK
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Once pointed at mimalloc (before SQLite's first use: no other
    /// test of this binary opens a database), SQLite's blocks are
    /// mimalloc's, and a database works on them: rows written, grown,
    /// read back.
    #[test]
    fn sqlite_allocates_from_mimalloc() {
        use libsqlite3_sys as sq;
        assert!(sqlite_on_mimalloc(), "SQLite refused the allocator");
        // SAFETY: SQLite's C API used as documented: a block allocated
        // and freed by SQLite, one in-memory connection opened, used
        // through `sqlite3_exec` and closed.
        unsafe {
            let p = sq::sqlite3_malloc(100);
            assert!(!p.is_null());
            assert!(mi_is_in_heap_region(p), "not a mimalloc block");
            assert!(sq::sqlite3_msize(p) >= 100);
            let p = sq::sqlite3_realloc(p, 5000);
            assert!(mi_is_in_heap_region(p) && sq::sqlite3_msize(p) >= 5000);
            sq::sqlite3_free(p);

            let mut db = std::ptr::null_mut();
            assert_eq!(
                sq::sqlite3_open(c":memory:".as_ptr(), &raw mut db),
                sq::SQLITE_OK
            );
            let sql = c"CREATE TABLE t (v TEXT);
                WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
                INSERT INTO t SELECT printf('%.*c', i, 'x') FROM n;
                CREATE TABLE s AS SELECT SUM(LENGTH(v)) AS total FROM t;";
            let rc = sq::sqlite3_exec(
                db,
                sql.as_ptr(),
                None,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            );
            assert_eq!(rc, sq::SQLITE_OK);
            let mut st = std::ptr::null_mut();
            let q = c"SELECT total FROM s";
            assert_eq!(
                sq::sqlite3_prepare_v2(db, q.as_ptr(), -1, &raw mut st, std::ptr::null_mut()),
                sq::SQLITE_OK
            );
            assert_eq!(sq::sqlite3_step(st), sq::SQLITE_ROW);
            assert_eq!(sq::sqlite3_column_int64(st, 0), 2000 * 2001 / 2);
            sq::sqlite3_finalize(st);
            assert_eq!(sq::sqlite3_close(db), sq::SQLITE_OK);
        }
    }

    /// Blocks of the sizes the gateway asks for, and over-aligned ones,
    /// come back aligned as asked, writable to their last byte, keep their
    /// bytes when grown and shrunk, and are freed.
    #[test]
    fn blocks_are_aligned_as_asked_and_keep_their_bytes() {
        let sizes = [1, 7, 8, 12, 16, 24, 40, 100, 1000, 1025, 1500, 4097, 70_000];
        for align in [1, 2, 4, 8, 16, 32, 64, 128, 4096] {
            for size in sizes {
                let layout = Layout::from_size_align(size, align).unwrap();
                let grown = size * 3;
                let shrunk = size / 2 + 1;
                // SAFETY: non-zero sizes; each block is used within its
                // size and freed once with the layout it has then.
                unsafe {
                    let p = Mimalloc.alloc(layout);
                    assert!(!p.is_null());
                    assert_eq!(p.addr() % align, 0, "size {size} align {align}");
                    p.write_bytes(0xA5, size);
                    let p = Mimalloc.realloc(p, layout, grown);
                    assert_eq!(p.addr() % align, 0, "grown {size} align {align}");
                    assert!((0..size).all(|i| *p.add(i) == 0xA5), "grown {size}");
                    p.add(size).write_bytes(0x5A, grown - size);
                    let grown = Layout::from_size_align(grown, align).unwrap();
                    let p = Mimalloc.realloc(p, grown, shrunk);
                    assert_eq!(p.addr() % align, 0, "shrunk {size} align {align}");
                    assert!((0..shrunk.min(size)).all(|i| *p.add(i) == 0xA5));
                    Mimalloc.dealloc(p, Layout::from_size_align(shrunk, align).unwrap());
                    let z = Mimalloc.alloc_zeroed(layout);
                    assert_eq!(z.addr() % align, 0, "zeroed {size} align {align}");
                    assert!((0..size).all(|i| *z.add(i) == 0));
                    Mimalloc.dealloc(z, layout);
                }
            }
        }
    }
}
