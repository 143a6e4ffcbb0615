//! Reading one setting from the environment: the error that names it, and
//! booleans. The bottom of the settings modules: the functions' own
//! settings and sign-in's both build on it.

/// A missing or malformed setting, named so the operator can fix it.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("environment variable {0} is not set (it is required)")]
    Missing(&'static str),
    #[error("environment variable {name} is invalid: {reason}")]
    Invalid { name: &'static str, reason: String },
}

/// A boolean setting: unset, empty, `false` or `0` is off; `true` or `1` is on.
/// [`flag`] with `default` where the variable is unset or empty.
pub fn flag_or(
    get: &impl Fn(&str) -> Option<String>,
    name: &'static str,
    default: bool,
) -> Result<bool, ConfigError> {
    match get(name).as_deref().map(str::trim) {
        None | Some("") => Ok(default),
        _ => flag(get, name),
    }
}

pub fn flag(
    get: &impl Fn(&str) -> Option<String>,
    name: &'static str,
) -> Result<bool, ConfigError> {
    match get(name).as_deref().map(str::trim) {
        None | Some("") | Some("false") | Some("0") => Ok(false),
        Some("true") | Some("1") => Ok(true),
        Some(other) => Err(ConfigError::Invalid {
            name,
            reason: format!("{other:?} is not true or false"),
        }),
    }
}
