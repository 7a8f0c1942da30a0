//! Symbolic shape expressions (placeholder; being written).
