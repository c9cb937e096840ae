"""What people read: terminal tables, JUnit and Markdown (`console`), and run history
(`history`). The HTML report lives in `callgate.web`."""
