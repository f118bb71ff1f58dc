//! The agent's memory allocator (feature `mimalloc`).
//!
//! A full download of a large Southbound database is hundreds of MB of small objects (rows,
//! strings, index entries) plus one very large buffer: the monitor reply, tens of MB, read
//! into a buffer that grows as the bytes arrive. The two want different allocators:
//!
//! - small objects go to mimalloc, which serves them with far fewer page faults and less
//!   work than glibc malloc (figures in docs/ovsdb-benchmark.md);
//! - blocks of [`HUGE`] bytes and more go to glibc malloc, which maps them with `mmap` and
//!   grows them with `mremap`: the pages move, nothing is copied, and only the bytes actually
//!   written are ever touched. mimalloc grows such a block by allocating a new one and
//!   copying, which for a 70 MB reply touches about 256 MB of fresh memory.
//!
//! A block belongs to the allocator its size picks, and `GlobalAlloc` is always told the size
//! on `dealloc`/`realloc`, so no bookkeeping is needed; a `realloc` that crosses [`HUGE`]
//! moves the block between the two.
//!
//! On musl (`target_env = "musl"`, the static build) the huge blocks go to musl's malloc, which
//! also maps every block above its fixed threshold (about 128 KiB) on its own and grows it with
//! `mremap`; it has no tunable threshold (`mallopt` is glibc's), so there is nothing to pin.

// Unsafe code allowed in this file only: a global allocator is unsafe by definition (GlobalAlloc, mmap/mremap).
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout};
#[cfg(target_env = "gnu")]
use std::sync::atomic::{AtomicBool, Ordering};

/// Blocks at least this large are mapped directly (libc `mmap`/`mremap`).
pub const HUGE: usize = 4 << 20;

/// glibc and musl align every block to 16 bytes; larger alignments stay with mimalloc.
const GLIBC_ALIGN: usize = 16;

pub struct AgentAllocator;

fn is_huge(size: usize, align: usize) -> bool {
    size >= HUGE && align <= GLIBC_ALIGN
}

#[cfg(target_env = "gnu")]
static MMAP_THRESHOLD_SET: AtomicBool = AtomicBool::new(false);

/// Pins glibc's mmap threshold at [`HUGE`] (it otherwise rises after frees, up to 32 MB, and
/// then serves such blocks from the heap, where `realloc` copies).
#[cfg(target_env = "gnu")]
fn pin_mmap_threshold() {
    if !MMAP_THRESHOLD_SET.load(Ordering::Relaxed) {
        // SAFETY: mallopt only changes glibc's tunables; it does not allocate through us.
        unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, HUGE as libc::c_int) };
        MMAP_THRESHOLD_SET.store(true, Ordering::Relaxed);
    }
}

/// Nothing to pin outside glibc: musl maps every block this large on its own, always (its
/// threshold is fixed, far below [`HUGE`]), and grows it with `mremap` as glibc does.
#[cfg(not(target_env = "gnu"))]
fn pin_mmap_threshold() {}

/// Asks for transparent huge pages on a huge block (THP is in `madvise` mode on most
/// distributions): one fault per 2 MB instead of per 4 KB while the block fills. The flag is a
/// property of the mapping, so it survives `mremap`. Best effort: an error changes nothing.
fn advise_huge_pages(ptr: *mut u8, size: usize) {
    if ptr.is_null() {
        return;
    }
    let page = 4096usize;
    let start = (ptr as usize) & !(page - 1);
    let end = (ptr as usize + size).div_ceil(page) * page;
    // SAFETY: the range lies within the mapping glibc just created for this block.
    unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
}

// SAFETY: every block is freed/resized by the allocator that produced it, chosen by the same
// `is_huge` test on the layout the caller must pass back unchanged (GlobalAlloc's contract).
unsafe impl GlobalAlloc for AgentAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if is_huge(layout.size(), layout.align()) {
            pin_mmap_threshold();
            // SAFETY: size is non-zero (>= HUGE).
            let ptr: *mut u8 = unsafe { libc::malloc(layout.size()).cast() };
            advise_huge_pages(ptr, layout.size());
            ptr
        } else {
            // SAFETY: forwarded with the caller's layout.
            unsafe { mimalloc::MiMalloc.alloc(layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if is_huge(layout.size(), layout.align()) {
            pin_mmap_threshold();
            // SAFETY: as above; fresh mappings are already zero, so calloc does not write them.
            let ptr: *mut u8 = unsafe { libc::calloc(1, layout.size()).cast() };
            advise_huge_pages(ptr, layout.size());
            ptr
        } else {
            // SAFETY: forwarded with the caller's layout.
            unsafe { mimalloc::MiMalloc.alloc_zeroed(layout) }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if is_huge(layout.size(), layout.align()) {
            // SAFETY: the block came from libc::malloc/calloc/realloc (same test at allocation).
            unsafe { libc::free(ptr.cast()) }
        } else {
            // SAFETY: the block came from mimalloc with this layout.
            unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let was_huge = is_huge(layout.size(), layout.align());
        let will_be_huge = is_huge(new_size, layout.align());
        match (was_huge, will_be_huge) {
            (true, true) => {
                // SAFETY: a glibc block resized by glibc (mremap for mapped blocks).
                let new: *mut u8 = unsafe { libc::realloc(ptr.cast(), new_size).cast() };
                // mremap may place the grown block in a new mapping (without the flag).
                advise_huge_pages(new, new_size);
                new
            }
            // SAFETY: a mimalloc block resized by mimalloc.
            (false, false) => unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) },
            _ => {
                // SAFETY: the caller guarantees new_size, with layout's alignment, is a valid
                // layout (GlobalAlloc::realloc's contract).
                let new_layout =
                    unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
                // SAFETY: new_layout is valid and non-zero.
                let new = unsafe { self.alloc(new_layout) };
                if !new.is_null() {
                    // SAFETY: both blocks are live and at least min(old, new) bytes long.
                    unsafe {
                        std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                        self.dealloc(ptr, layout);
                    }
                }
                new
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks cross the HUGE boundary both ways with their contents intact.
    #[test]
    fn blocks_move_between_allocators_intact() {
        let a = AgentAllocator;
        let sizes = [64, HUGE - 1, HUGE, 3 * HUGE, 1000, 2 * HUGE + 7, 16];
        unsafe {
            let layout = Layout::from_size_align(sizes[0], 8).unwrap();
            let mut p = a.alloc(layout);
            let mut size = sizes[0];
            std::ptr::write_bytes(p, 0xa5, size);
            for &next in &sizes[1..] {
                p = a.realloc(p, Layout::from_size_align(size, 8).unwrap(), next);
                assert!(!p.is_null());
                let kept = size.min(next);
                let s = std::slice::from_raw_parts(p, kept);
                assert!(
                    s.iter().all(|&b| b == 0xa5),
                    "contents lost growing {size} -> {next}"
                );
                std::ptr::write_bytes(p, 0xa5, next);
                size = next;
            }
            a.dealloc(p, Layout::from_size_align(size, 8).unwrap());
            let z = a.alloc_zeroed(Layout::from_size_align(2 * HUGE, 16).unwrap());
            assert!(
                std::slice::from_raw_parts(z, 2 * HUGE)
                    .iter()
                    .all(|&b| b == 0)
            );
            a.dealloc(z, Layout::from_size_align(2 * HUGE, 16).unwrap());
            // Over-aligned huge blocks stay with mimalloc.
            let l = Layout::from_size_align(HUGE, 4096).unwrap();
            let q = a.alloc(l);
            assert_eq!(q as usize % 4096, 0);
            a.dealloc(q, l);
        }
    }
}
