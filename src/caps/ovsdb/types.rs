//! OVSDB values (RFC 7047 section 5.1): atoms, sets and maps, in a compact in-memory form.
//!
//! A [`Datum`] is the value of one column. A set of exactly one element is stored as
//! [`Datum::Atom`] (OVSDB treats `x` and `["set",[x]]` as equal), so the common scalar and
//! optional columns cost no heap allocation beyond their string. Strings are `Arc<str>` so the
//! replica and the change events share them.

use std::fmt;
use std::sync::Arc;

use serde::de::{self, DeserializeSeed, IgnoredAny, SeqAccess, Visitor};
use serde::ser::{SerializeSeq, Serializer};
use serde::{Deserialize, Deserializer, Serialize};

/// An OVSDB UUID, stored as 16 bytes (alignment 1 keeps [`Atom`] small).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Uuid(pub [u8; 16]);

impl Uuid {
    pub const ZERO: Uuid = Uuid([0; 16]);

    /// Parses the canonical `8-4-4-4-12` hex form.
    pub fn parse(s: &str) -> Option<Uuid> {
        // Every replica row carries several UUIDs (its own, datapath, chassis), so this is on
        // the hot path of a full download: fixed offsets and a lookup table, no branches per
        // character beyond the one validity check.
        const PAIRS: [usize; 16] = [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34];
        let b: &[u8; 36] = s.as_bytes().try_into().ok()?;
        if b[8] != b'-' || b[13] != b'-' || b[18] != b'-' || b[23] != b'-' {
            return None;
        }
        let mut out = [0u8; 16];
        let mut bad = 0u8;
        for (o, &i) in out.iter_mut().zip(PAIRS.iter()) {
            let hi = HEX[b[i] as usize];
            let lo = HEX[b[i + 1] as usize];
            bad |= hi | lo;
            *o = (hi << 4) | (lo & 0x0f);
        }
        (bad & 0x80 == 0).then_some(Uuid(out))
    }

    /// A random version-4 UUID (used for request ids and uuid-names).
    pub fn random() -> Uuid {
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&crate::caps::ovsdb::remote::random_u64().to_le_bytes());
        out[8..].copy_from_slice(&crate::caps::ovsdb::remote::random_u64().to_le_bytes());
        out[6] = (out[6] & 0x0f) | 0x40;
        out[8] = (out[8] & 0x3f) | 0x80;
        Uuid(out)
    }
}

/// Hex digit values; 0x80 marks a byte that is not a hex digit.
static HEX: [u8; 256] = {
    let mut t = [0x80u8; 256];
    let mut c = 0;
    while c < 256 {
        t[c] = match c as u8 {
            d @ b'0'..=b'9' => d - b'0',
            d @ b'a'..=b'f' => d - b'a' + 10,
            d @ b'A'..=b'F' => d - b'A' + 10,
            _ => 0x80,
        };
        c += 1;
    }
    t
};

impl fmt::Display for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, byte) in self.0.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::str::FromStr for Uuid {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Uuid::parse(s).ok_or_else(|| format!("{s:?} is not a UUID"))
    }
}

/// One OVSDB atom. Reals compare and hash by their bits, so atoms can key an index.
#[derive(Clone, Debug)]
pub enum Atom {
    Integer(i64),
    Real(f64),
    Boolean(bool),
    String(Arc<str>),
    Uuid(Uuid),
    /// A reference to a row inserted earlier in the same transaction (`["named-uuid", name]`);
    /// only meaningful in operations sent to the server.
    NamedUuid(Arc<str>),
}

impl PartialEq for Atom {
    fn eq(&self, other: &Atom) -> bool {
        match (self, other) {
            (Atom::Integer(a), Atom::Integer(b)) => a == b,
            (Atom::Real(a), Atom::Real(b)) => a.to_bits() == b.to_bits(),
            (Atom::Boolean(a), Atom::Boolean(b)) => a == b,
            (Atom::String(a), Atom::String(b)) => a == b,
            (Atom::Uuid(a), Atom::Uuid(b)) => a == b,
            (Atom::NamedUuid(a), Atom::NamedUuid(b)) => a == b,
            _ => false,
        }
    }
}
impl Eq for Atom {}

impl std::hash::Hash for Atom {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        match self {
            Atom::Integer(i) => (0u8, i).hash(h),
            Atom::Real(r) => (1u8, r.to_bits()).hash(h),
            Atom::Boolean(b) => (2u8, b).hash(h),
            Atom::String(s) => (3u8, &**s).hash(h),
            Atom::Uuid(u) => (4u8, u).hash(h),
            Atom::NamedUuid(n) => (5u8, &**n).hash(h),
        }
    }
}

impl Atom {
    pub fn string(s: impl AsRef<str>) -> Atom {
        Atom::String(Arc::from(s.as_ref()))
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Atom::String(s) => Some(s),
            _ => None,
        }
    }
    pub fn as_uuid(&self) -> Option<Uuid> {
        match self {
            Atom::Uuid(u) => Some(*u),
            _ => None,
        }
    }
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Atom::Integer(i) => Some(*i),
            _ => None,
        }
    }
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Atom::Boolean(b) => Some(*b),
            _ => None,
        }
    }
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Atom::Real(r) => Some(*r),
            Atom::Integer(i) => Some(*i as f64),
            _ => None,
        }
    }
}

impl From<&str> for Atom {
    fn from(s: &str) -> Self {
        Atom::string(s)
    }
}
impl From<String> for Atom {
    fn from(s: String) -> Self {
        Atom::String(Arc::from(s))
    }
}
impl From<i64> for Atom {
    fn from(i: i64) -> Self {
        Atom::Integer(i)
    }
}
impl From<bool> for Atom {
    fn from(b: bool) -> Self {
        Atom::Boolean(b)
    }
}
impl From<f64> for Atom {
    fn from(r: f64) -> Self {
        Atom::Real(r)
    }
}
impl From<Uuid> for Atom {
    fn from(u: Uuid) -> Self {
        Atom::Uuid(u)
    }
}

/// The value of one column: an atom, a set, or a map.
#[derive(Clone, Debug, PartialEq)]
pub enum Datum {
    /// A scalar, or a set holding exactly one element.
    Atom(Atom),
    /// A set of zero or at least two elements.
    Set(Box<[Atom]>),
    /// A map (possibly empty), pairs in server order.
    Map(Box<[(Atom, Atom)]>),
}

impl Default for Datum {
    fn default() -> Self {
        Datum::Set(Box::new([]))
    }
}

impl Datum {
    /// The empty set (also the value of an unset optional column).
    pub fn empty() -> Datum {
        Datum::default()
    }

    /// A set from atoms, normalized (one element becomes [`Datum::Atom`]).
    pub fn set(mut atoms: Vec<Atom>) -> Datum {
        if atoms.len() == 1 {
            Datum::Atom(atoms.pop().unwrap_or(Atom::Boolean(false)))
        } else {
            Datum::Set(atoms.into_boxed_slice())
        }
    }

    pub fn map<K: Into<Atom>, V: Into<Atom>>(pairs: impl IntoIterator<Item = (K, V)>) -> Datum {
        Datum::Map(
            pairs
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        )
    }

    /// The elements of a set or scalar (a map yields nothing).
    pub fn atoms(&self) -> &[Atom] {
        match self {
            Datum::Atom(a) => std::slice::from_ref(a),
            Datum::Set(s) => s,
            Datum::Map(_) => &[],
        }
    }

    /// The pairs of a map (anything else yields nothing).
    pub fn pairs(&self) -> &[(Atom, Atom)] {
        match self {
            Datum::Map(m) => m,
            _ => &[],
        }
    }

    /// The single atom of a scalar or one-element set.
    pub fn as_atom(&self) -> Option<&Atom> {
        match self {
            Datum::Atom(a) => Some(a),
            _ => None,
        }
    }

    pub fn is_empty(&self) -> bool {
        match self {
            Datum::Atom(_) => false,
            Datum::Set(s) => s.is_empty(),
            Datum::Map(m) => m.is_empty(),
        }
    }

    /// Applies an `update2` "modify" difference (RFC 7047 ext, OVS `ovsdb_datum_apply_diff`):
    /// set elements present are removed and absent ones added; map keys present with the same
    /// value are removed, present with another value are replaced, absent ones are added.
    pub fn apply_diff(&self, diff: &Datum) -> Datum {
        match (self, diff) {
            (Datum::Map(old), Datum::Map(d)) => {
                let mut out: Vec<(Atom, Atom)> = old.to_vec();
                for (k, v) in d.iter() {
                    match out.iter().position(|(ok, _)| ok == k) {
                        Some(pos) if &out[pos].1 == v => {
                            out.remove(pos);
                        }
                        Some(pos) => out[pos].1 = v.clone(),
                        None => out.push((k.clone(), v.clone())),
                    }
                }
                Datum::Map(out.into_boxed_slice())
            }
            (Datum::Map(_), Datum::Set(s)) if s.is_empty() => self.clone(),
            (Datum::Set(_) | Datum::Atom(_), Datum::Map(m)) if m.is_empty() => self.clone(),
            (Datum::Map(_), _) | (_, Datum::Map(_)) => diff.clone(),
            _ => {
                let mut out: Vec<Atom> = self.atoms().to_vec();
                for a in diff.atoms() {
                    match out.iter().position(|o| o == a) {
                        Some(pos) => {
                            out.remove(pos);
                        }
                        None => out.push(a.clone()),
                    }
                }
                Datum::set(out)
            }
        }
    }
}

impl From<Atom> for Datum {
    fn from(a: Atom) -> Self {
        Datum::Atom(a)
    }
}
impl From<&str> for Datum {
    fn from(s: &str) -> Self {
        Datum::Atom(Atom::string(s))
    }
}
impl From<String> for Datum {
    fn from(s: String) -> Self {
        Datum::Atom(Atom::from(s))
    }
}
impl From<i64> for Datum {
    fn from(i: i64) -> Self {
        Datum::Atom(Atom::Integer(i))
    }
}
impl From<bool> for Datum {
    fn from(b: bool) -> Self {
        Datum::Atom(Atom::Boolean(b))
    }
}
impl From<Uuid> for Datum {
    fn from(u: Uuid) -> Self {
        Datum::Atom(Atom::Uuid(u))
    }
}
impl From<Option<Uuid>> for Datum {
    fn from(u: Option<Uuid>) -> Self {
        u.map(Datum::from).unwrap_or_default()
    }
}

// ---- JSON encoding ----

impl Serialize for Uuid {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl Serialize for Atom {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Atom::Integer(i) => s.serialize_i64(*i),
            Atom::Real(r) => s.serialize_f64(*r),
            Atom::Boolean(b) => s.serialize_bool(*b),
            Atom::String(v) => s.serialize_str(v),
            Atom::Uuid(u) => {
                let mut seq = s.serialize_seq(Some(2))?;
                seq.serialize_element("uuid")?;
                seq.serialize_element(u)?;
                seq.end()
            }
            Atom::NamedUuid(n) => {
                let mut seq = s.serialize_seq(Some(2))?;
                seq.serialize_element("named-uuid")?;
                seq.serialize_element(&**n)?;
                seq.end()
            }
        }
    }
}

struct Pair<'a>(&'a Atom, &'a Atom);
impl Serialize for Pair<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(2))?;
        seq.serialize_element(self.0)?;
        seq.serialize_element(self.1)?;
        seq.end()
    }
}
struct Pairs<'a>(&'a [(Atom, Atom)]);
impl Serialize for Pairs<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|(k, v)| Pair(k, v)))
    }
}

impl Serialize for Datum {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Datum::Atom(a) => a.serialize(s),
            Datum::Set(atoms) => {
                let mut seq = s.serialize_seq(Some(2))?;
                seq.serialize_element("set")?;
                seq.serialize_element(&**atoms)?;
                seq.end()
            }
            Datum::Map(pairs) => {
                let mut seq = s.serialize_seq(Some(2))?;
                seq.serialize_element("map")?;
                seq.serialize_element(&Pairs(pairs))?;
                seq.end()
            }
        }
    }
}

// ---- JSON decoding, straight into the compact form (no serde_json::Value in between) ----

impl<'de> Deserialize<'de> for Uuid {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Uuid;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a UUID string")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Uuid, E> {
                Uuid::parse(v).ok_or_else(|| E::custom(format!("{v:?} is not a UUID")))
            }
        }
        d.deserialize_str(V)
    }
}

/// Shares the `Arc<str>` of strings that repeat across rows (map keys such as
/// `neutron:device_owner`, values such as `""`, `localnet`, `compute:nova`, a network's name
/// or a project id): fewer allocations while decoding and less memory in the replica.
///
/// A direct-mapped cache of a fixed number of slots, not a set: a string whose slot holds
/// another string takes the slot, so repeated strings stay shared while unique ones (port
/// UUIDs, addresses) only pass through. Memory is bounded whatever the database holds, a
/// lookup is one hash and one comparison, and nothing is kept alive for long once its rows are
/// gone.
pub struct Interner {
    slots: Box<[Option<Arc<str>>]>,
    // foldhash: fast and seeded per process, so tenant-chosen strings cannot be crafted to
    // collide with a chosen victim's slot.
    hasher: foldhash::fast::RandomState,
}

impl std::fmt::Debug for Interner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interner")
            .field("len", &self.len())
            .finish()
    }
}

/// Slots of an [`Interner`] (a power of two; 256 KiB of pointers).
const INTERNER_SLOTS: usize = 16_384;

impl Default for Interner {
    fn default() -> Self {
        Interner {
            slots: vec![None; INTERNER_SLOTS].into_boxed_slice(),
            hasher: Default::default(),
        }
    }
}

impl Interner {
    /// The shared copy of `s`, or a fresh one that now takes its slot.
    pub fn intern(&mut self, s: &str) -> Arc<str> {
        use std::hash::BuildHasher;
        let slot = self.hasher.hash_one(s) as usize & (INTERNER_SLOTS - 1);
        if let Some(a) = &self.slots[slot]
            && **a == *s
        {
            return a.clone();
        }
        let a: Arc<str> = Arc::from(s);
        self.slots[slot] = Some(a.clone());
        a
    }
    /// Strings held.
    pub fn len(&self) -> usize {
        self.slots.iter().filter(|s| s.is_some()).count()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A string that borrows from the input when it has no escapes. (serde's own `Cow<str>`
/// always allocates, which for object keys and type tags was the largest decoding cost.)
pub struct KeyStr<'de>(pub std::borrow::Cow<'de, str>);

impl<'de> Deserialize<'de> for KeyStr<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = KeyStr<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(KeyStr(std::borrow::Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(KeyStr(std::borrow::Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(KeyStr(std::borrow::Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

impl std::ops::Deref for KeyStr<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

/// What an array in atom position turned out to be.
enum Tagged {
    Atom(Atom),
    Set(Vec<Atom>),
    Map(Vec<(Atom, Atom)>),
}

/// Decodes one atom with serde (messages other than table-updates, which [`super::decode`]
/// handles).
struct AtomSeed;
impl<'de> DeserializeSeed<'de> for AtomSeed {
    type Value = Atom;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Atom, D::Error> {
        match d.deserialize_any(TaggedVisitor {
            allow_collections: false,
        })? {
            Tagged::Atom(a) => Ok(a),
            _ => Err(de::Error::custom("set or map where an atom was expected")),
        }
    }
}

struct AtomSeq;
impl<'de> DeserializeSeed<'de> for AtomSeq {
    type Value = Vec<Atom>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<Atom>, D::Error> {
        d.deserialize_seq(self)
    }
}
impl<'de> Visitor<'de> for AtomSeq {
    type Value = Vec<Atom>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of OVSDB atoms")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Atom>, A::Error> {
        let mut out = Vec::new();
        while let Some(a) = seq.next_element_seed(AtomSeed)? {
            out.push(a);
        }
        Ok(out)
    }
}

struct PairSeed;
impl<'de> DeserializeSeed<'de> for PairSeed {
    type Value = (Atom, Atom);
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}
impl<'de> Visitor<'de> for PairSeed {
    type Value = (Atom, Atom);
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a [key, value] pair")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let bad = || de::Error::custom("map pair is not [key, value]");
        let k = seq.next_element_seed(AtomSeed)?.ok_or_else(bad)?;
        let v = seq.next_element_seed(AtomSeed)?.ok_or_else(bad)?;
        if seq.next_element::<IgnoredAny>()?.is_some() {
            return Err(bad());
        }
        Ok((k, v))
    }
}

struct PairSeq;
impl<'de> DeserializeSeed<'de> for PairSeq {
    type Value = Vec<(Atom, Atom)>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}
impl<'de> Visitor<'de> for PairSeq {
    type Value = Vec<(Atom, Atom)>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of map pairs")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        // Collect in a reused scratch buffer, then allocate the map once at its exact size.
        thread_local! {
            static SCRATCH: std::cell::RefCell<Vec<(Atom, Atom)>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        let mut buf = SCRATCH.with(|s| std::mem::take(&mut *s.borrow_mut()));
        buf.clear();
        let result = loop {
            match seq.next_element_seed(PairSeed) {
                Ok(Some(p)) => buf.push(p),
                Ok(None) => {
                    let mut exact = Vec::with_capacity(buf.len());
                    exact.append(&mut buf);
                    break Ok(exact);
                }
                Err(e) => break Err(e),
            }
        };
        buf.clear();
        SCRATCH.with(|s| *s.borrow_mut() = buf);
        result
    }
}

struct TaggedVisitor {
    allow_collections: bool,
}

impl<'de> Visitor<'de> for TaggedVisitor {
    type Value = Tagged;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an OVSDB atom, set or map")
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Tagged, E> {
        Ok(Tagged::Atom(Atom::Integer(v)))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Tagged, E> {
        i64::try_from(v)
            .map(|i| Tagged::Atom(Atom::Integer(i)))
            .map_err(|_| E::custom(format!("integer {v} out of range")))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Tagged, E> {
        Ok(Tagged::Atom(Atom::Real(v)))
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Tagged, E> {
        Ok(Tagged::Atom(Atom::Boolean(v)))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Tagged, E> {
        Ok(Tagged::Atom(Atom::String(Arc::from(v))))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Tagged, A::Error> {
        let tag: KeyStr<'de> = seq
            .next_element()?
            .ok_or_else(|| de::Error::custom("empty array where an OVSDB value was expected"))?;
        let out = match &*tag {
            "uuid" => {
                let u: Uuid = seq
                    .next_element()?
                    .ok_or_else(|| de::Error::custom("[\"uuid\"] without a value"))?;
                Tagged::Atom(Atom::Uuid(u))
            }
            "named-uuid" => {
                let n: String = seq
                    .next_element()?
                    .ok_or_else(|| de::Error::custom("[\"named-uuid\"] without a name"))?;
                Tagged::Atom(Atom::NamedUuid(Arc::from(n)))
            }
            "set" if self.allow_collections => Tagged::Set(
                seq.next_element_seed(AtomSeq)?
                    .ok_or_else(|| de::Error::custom("[\"set\"] without elements"))?,
            ),
            "map" if self.allow_collections => Tagged::Map(
                seq.next_element_seed(PairSeq)?
                    .ok_or_else(|| de::Error::custom("[\"map\"] without pairs"))?,
            ),
            other => return Err(de::Error::custom(format!("unknown OVSDB tag {other:?}"))),
        };
        if seq.next_element::<IgnoredAny>()?.is_some() {
            return Err(de::Error::custom(
                "OVSDB tagged value with more than 2 elements",
            ));
        }
        Ok(out)
    }
}

impl<'de> Deserialize<'de> for Datum {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Datum, D::Error> {
        Ok(
            match d.deserialize_any(TaggedVisitor {
                allow_collections: true,
            })? {
                Tagged::Atom(a) => Datum::Atom(a),
                Tagged::Set(s) => Datum::set(s),
                Tagged::Map(m) => Datum::Map(m.into_boxed_slice()),
            },
        )
    }
}

impl<'de> Deserialize<'de> for Atom {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        AtomSeed.deserialize(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_sizes() {
        assert_eq!(std::mem::size_of::<Atom>(), 24);
        assert!(std::mem::size_of::<Datum>() <= 32);
    }

    #[test]
    fn round_trip_and_diff() {
        let u = Uuid::parse("01234567-89ab-cdef-0123-456789abcdef").unwrap();
        assert_eq!(u.to_string(), "01234567-89ab-cdef-0123-456789abcdef");
        let d: Datum = serde_json::from_str(r#"["map",[["a","1"],["b","2"]]]"#).unwrap();
        let diff: Datum =
            serde_json::from_str(r#"["map",[["a","1"],["b","3"],["c","4"]]]"#).unwrap();
        assert_eq!(
            serde_json::to_string(&d.apply_diff(&diff)).unwrap(),
            r#"["map",[["b","3"],["c","4"]]]"#
        );
        let s: Datum =
            serde_json::from_str(r#"["set",[["uuid","01234567-89ab-cdef-0123-456789abcdef"]]]"#)
                .unwrap();
        assert_eq!(s, Datum::Atom(Atom::Uuid(u)));
        let e: Datum = serde_json::from_str(r#"["set",[]]"#).unwrap();
        assert!(e.is_empty());
        assert_eq!(e.apply_diff(&s), s);
        assert_eq!(s.apply_diff(&s), Datum::empty());
    }
}
