"""What each component creates, as plain data: one folder per component in components/."""
