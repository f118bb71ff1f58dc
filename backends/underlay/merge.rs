//! The entries that differ between two collections ordered by key, found in one merge: how the
//! incremental render compares the routes and subnets of its last exposure set with the new
//! one's (the IPs, in persistent maps, are compared by `exposure::ip_changes`).

/// One side of a difference.
pub(crate) enum Side<'a, K, V> {
    /// Only in the old collection, or changed (then followed by its `New`).
    Old(&'a K, &'a V),
    /// Only in the new collection, or changed.
    New(&'a K, &'a V),
}

/// The entries that differ between `old` and `new`, both ordered by key with unique keys:
/// removed ones as `Old`, added ones as `New`, a changed one as its `Old` then its `New`, in key
/// order. An equal entry costs one comparison of keys and one of values.
pub(crate) fn differences<'a, K: Ord + 'a, V: PartialEq + 'a>(
    old: impl IntoIterator<Item = (&'a K, &'a V)>,
    new: impl IntoIterator<Item = (&'a K, &'a V)>,
) -> Vec<Side<'a, K, V>> {
    let mut out = Vec::new();
    let (mut old, mut new) = (old.into_iter().peekable(), new.into_iter().peekable());
    loop {
        match (old.peek(), new.peek()) {
            (None, None) => return out,
            (Some(&(k, v)), None) => {
                out.push(Side::Old(k, v));
                old.next();
            }
            (None, Some(&(k, v))) => {
                out.push(Side::New(k, v));
                new.next();
            }
            (Some(&(ko, vo)), Some(&(kn, vn))) => match ko.cmp(kn) {
                std::cmp::Ordering::Less => {
                    out.push(Side::Old(ko, vo));
                    old.next();
                }
                std::cmp::Ordering::Greater => {
                    out.push(Side::New(kn, vn));
                    new.next();
                }
                std::cmp::Ordering::Equal => {
                    if vo != vn {
                        out.push(Side::Old(ko, vo));
                        out.push(Side::New(kn, vn));
                    }
                    old.next();
                    new.next();
                }
            },
        }
    }
}

/// A set's elements as the keys of [`differences`] (with no value to compare).
pub(crate) fn keyed<T>(element: &T) -> (&T, &()) {
    (element, &())
}
