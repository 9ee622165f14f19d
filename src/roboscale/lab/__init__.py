"""The lab: runs planned trials against backends and keeps every result on disk."""
