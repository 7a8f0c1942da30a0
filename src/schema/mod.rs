//! Export schema (placeholder).
