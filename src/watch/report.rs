//! The final report (to be written).
