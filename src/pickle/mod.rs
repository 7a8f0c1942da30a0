//! Safe reader for torch.save pickles (placeholder; being written).
