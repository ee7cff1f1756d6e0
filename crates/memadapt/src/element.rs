//! What a data file's panels hold: the element type its header records,
//! apart from the file format so that the errors can name it without
//! depending on the file module (which depends on them).

use std::fmt;

/// What the panels hold, recorded in the header so that typed access
/// ([`crate::PanelStore::panel_as`]) can refuse the wrong type.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ElementType {
    /// Untyped: any element type may be read from the panels. `u8` panels
    /// are written as bytes.
    #[default]
    Bytes,
    I8,
    U16,
    I16,
    U32,
    I32,
    U64,
    I64,
    F32,
    F64,
}

impl ElementType {
    pub(crate) const ALL: [ElementType; 10] = [
        ElementType::Bytes,
        ElementType::I8,
        ElementType::U16,
        ElementType::I16,
        ElementType::U32,
        ElementType::I32,
        ElementType::U64,
        ElementType::I64,
        ElementType::F32,
        ElementType::F64,
    ];

    /// The tag stored in the header.
    pub fn tag(self) -> u32 {
        ElementType::ALL
            .iter()
            .position(|&t| t == self)
            .expect("every element type is in ALL") as u32
    }

    pub fn from_tag(tag: u32) -> Option<ElementType> {
        ElementType::ALL.get(tag as usize).copied()
    }

    /// Bytes of one element.
    pub fn size(self) -> usize {
        match self {
            ElementType::Bytes | ElementType::I8 => 1,
            ElementType::U16 | ElementType::I16 => 2,
            ElementType::U32 | ElementType::I32 | ElementType::F32 => 4,
            ElementType::U64 | ElementType::I64 | ElementType::F64 => 8,
        }
    }

    /// The Rust name ("f64"), "bytes" for untyped panels.
    pub fn name(self) -> &'static str {
        match self {
            ElementType::Bytes => "bytes",
            ElementType::I8 => "i8",
            ElementType::U16 => "u16",
            ElementType::I16 => "i16",
            ElementType::U32 => "u32",
            ElementType::I32 => "i32",
            ElementType::U64 => "u64",
            ElementType::I64 => "i64",
            ElementType::F32 => "f32",
            ElementType::F64 => "f64",
        }
    }

    /// Whether panels recorded as `self` may be accessed as `T`: always
    /// for untyped panels and for bytes, else only as the recorded type.
    pub(crate) fn admits(self, requested: ElementType) -> bool {
        self == ElementType::Bytes || requested == ElementType::Bytes || self == requested
    }
}

impl fmt::Display for ElementType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
