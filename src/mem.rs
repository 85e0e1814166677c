//! Big buffers backed by huge pages where the kernel offers them.
//!
//! Filling fresh memory costs a page fault per 4 KiB page: the kernel
//! clears the page and charges it to the process. For the 240 MiB snapshot
//! of a million-event session and the index vectors decoded from it, that
//! was a quarter of opening the session (perf: `exc_page_fault`,
//! `clear_page`, memcg charges). Linux backs a region with 2 MiB pages when
//! asked (`madvise(MADV_HUGEPAGE)`; transparent huge pages are often enabled
//! for regions that ask only): 512 times fewer faults, and freeing is
//! cheaper too. The advice changes no content and its failure is ignored;
//! elsewhere than Linux these functions only allocate.
//!
//! This module holds the crate's one `unsafe` block (the lint is denied
//! everywhere else): std has no `madvise`.

/// Regions smaller than this are left alone.
const HUGE_MIN: usize = 4 << 20;

/// Advises the kernel to back the 2 MiB-aligned pages inside
/// `[at, at + len)` with huge pages, if the region is big.
#[allow(unsafe_code)]
fn advise(at: *const u8, len: usize) {
    #[cfg(target_os = "linux")]
    if len >= HUGE_MIN {
        const HUGE: usize = 2 << 20;
        let at = at as usize;
        let start = at.next_multiple_of(HUGE);
        let end = at.saturating_add(len) / HUGE * HUGE;
        if end > start {
            // SAFETY: the callers pass the memory of one live allocation
            // that they own; MADV_HUGEPAGE is advice about how to back its
            // pages and changes no byte of it, so no memory Rust can see
            // changes. An error (no THP support) is only advice refused.
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (at, len);
}

/// A zeroed buffer of `len` bytes, backed by huge pages if it is big.
pub(crate) fn zeroed(len: usize) -> Vec<u8> {
    let buf = vec![0u8; len];
    advise(buf.as_ptr(), len);
    buf
}

/// An empty byte vector with room for `capacity` bytes, backed by huge
/// pages if that room is big; `None` if the room cannot be had (an error
/// for the caller, not an abort).
pub(crate) fn try_with_capacity(capacity: usize) -> Option<Vec<u8>> {
    let mut v = Vec::new();
    v.try_reserve_exact(capacity).ok()?;
    advise(v.as_ptr(), v.capacity());
    Some(v)
}

/// An empty vector with room for `capacity` items, backed by huge pages if
/// that room is big.
pub(crate) fn with_capacity<T>(capacity: usize) -> Vec<T> {
    let v: Vec<T> = Vec::with_capacity(capacity);
    advise(
        v.as_ptr().cast::<u8>(),
        v.capacity().saturating_mul(std::mem::size_of::<T>()),
    );
    v
}

#[cfg(test)]
mod tests {
    #[test]
    fn big_buffers_are_zeroed_and_usable() {
        let mut b = super::zeroed(9 << 20);
        assert_eq!(b.len(), 9 << 20);
        assert!(b.iter().all(|&x| x == 0));
        b[5 << 20] = 7;
        assert_eq!(b[5 << 20], 7);
        let mut v: Vec<(u64, u64)> = super::with_capacity(1 << 20);
        assert!(v.is_empty() && v.capacity() >= 1 << 20);
        v.extend((0..1u64 << 20).map(|i| (i, i * 2)));
        assert_eq!(v[123_456], (123_456, 246_912));
        let small: Vec<u8> = super::with_capacity(10);
        assert!(small.capacity() >= 10);
    }
}
