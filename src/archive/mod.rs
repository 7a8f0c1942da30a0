//! Archive reader (placeholder).
