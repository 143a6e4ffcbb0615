//! The UI's two static files, compiled in. Their names carry a hash of their
//! content, so they are cached for a year (`immutable`) and a new build's
//! pages ask for new names.

use std::sync::LazyLock;

use tfreg_model::hashing::sha256_hex;

/// A static file of the UI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asset {
    Css,
    Js,
}

static NAMES: LazyLock<[String; 2]> = LazyLock::new(|| {
    Asset::ALL.map(|a| {
        let hash = sha256_hex(a.body().as_bytes());
        format!("tfreg.{}.{}", &hash[..12], a.extension())
    })
});

impl Asset {
    pub const ALL: [Asset; 2] = [Asset::Css, Asset::Js];

    pub fn body(self) -> &'static str {
        match self {
            Asset::Css => include_str!("../templates/ui/static/tfreg.css"),
            Asset::Js => include_str!("../templates/ui/static/tfreg.js"),
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Asset::Css => "text/css; charset=utf-8",
            Asset::Js => "text/javascript; charset=utf-8",
        }
    }

    fn extension(self) -> &'static str {
        match self {
            Asset::Css => "css",
            Asset::Js => "js",
        }
    }

    /// `tfreg.<hash>.css`.
    pub fn file_name(self) -> &'static str {
        &NAMES[self as usize]
    }

    /// The asset of exactly this build's name (an old name is a 404).
    pub fn from_file_name(name: &str) -> Option<Asset> {
        Self::ALL.into_iter().find(|a| a.file_name() == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_the_content_hash() {
        for a in Asset::ALL {
            assert_eq!(Asset::from_file_name(a.file_name()), Some(a));
            assert_eq!(a.file_name().split('.').nth(1).map(str::len), Some(12));
        }
        assert_eq!(Asset::from_file_name("tfreg.css"), None);
    }
}
