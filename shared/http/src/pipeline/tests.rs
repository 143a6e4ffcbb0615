//! The layers' own logic, each alone around a stub service.
