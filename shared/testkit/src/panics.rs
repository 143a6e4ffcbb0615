//! Whether code panicked on this thread, even where a guard (`catch_unwind`)
//! turned the panic into an error: a panic hook, installed once, marks the
//! thread and then runs the hook it replaced (so messages print as before).

use std::cell::Cell;
use std::sync::Once;

thread_local! {
    static PANICKED: Cell<bool> = const { Cell::new(false) };
}

fn install() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICKED.with(|p| p.set(true));
            previous(info);
        }));
    });
}

/// Run `f`; also tell whether a panic was raised on this thread meanwhile.
pub fn caught<T>(f: impl FnOnce() -> T) -> (T, bool) {
    install();
    PANICKED.with(|p| p.set(false));
    let out = f();
    (out, PANICKED.with(|p| p.replace(false)))
}

#[cfg(test)]
#[test]
fn a_panic_caught_by_a_guard_is_seen() {
    let (out, panicked) = caught(|| std::panic::catch_unwind(|| panic!("inside")).is_err());
    assert!(out && panicked);
    let (_, panicked) = caught(|| 1 + 1);
    assert!(!panicked);
}
