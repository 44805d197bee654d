//! The progress line (to be written).
